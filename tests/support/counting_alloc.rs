//! A global allocator that counts live heap bytes and their peak, for the memory tests that are
//! test binaries of their own (it counts the whole process). Declared by each with
//! `#[path = "support/counting_alloc.rs"] mod counting_alloc;` and installed with
//! `#[global_allocator]`; [`LIVE`] and [`PEAK`] are read around the code measured.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

/// The counting allocator: the system's, with every size change added to [`LIVE`].
pub struct Counting;

/// Heap bytes live now.
pub static LIVE: AtomicUsize = AtomicUsize::new(0);
/// The most heap bytes live at once since it was last reset (store [`LIVE`] into it).
pub static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let live = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
        PEAK.fetch_max(live, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if new_size > layout.size() {
            let live = LIVE.fetch_add(new_size - layout.size(), Ordering::Relaxed) + new_size
                - layout.size();
            PEAK.fetch_max(live, Ordering::Relaxed);
        } else {
            LIVE.fetch_sub(layout.size() - new_size, Ordering::Relaxed);
        }
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}
