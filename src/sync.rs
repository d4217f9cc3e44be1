//! Locks that outlive a panicking holder: the one way this crate takes a `Mutex` or an
//! `RwLock`.
//!
//! Purpose: a standard lock is poisoned when a thread panics while holding it, and every later
//! `lock()` then fails. Written as `.lock().expect(…)` in ninety places, one panic (a bug in a
//! background task, say) would have become a panic in every thread that touches the same
//! state, the UI thread and the MCP server's workers included, and a person's typed message or
//! a host's connection would have gone with it. The panic itself is reported where it happens
//! (the panic hook, a task's join error); the state behind our locks is caches, queues, slots
//! and counters that each holder changes in single steps, so the next holder can read on.
//!
//! Invariant: [`LockExt::locked`], [`RwLockExt::read_locked`] and [`RwLockExt::write_locked`]
//! always return the guard, poisoned or not, and never panic. Proof: the unit tests poison a
//! lock from a thread that panics and take it again.
//!
//! Also here: [`both`], two jobs at once on the caller's thread and one more, for work that
//! waits on both (a heavy session's scan saved while its conversation is walked).

use std::sync::{Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// [`Mutex::lock`] that takes a poisoned lock as it was left.
pub trait LockExt<T: ?Sized> {
    /// The guard, whether or not a holder panicked.
    fn locked(&self) -> MutexGuard<'_, T>;
}

impl<T: ?Sized> LockExt<T> for Mutex<T> {
    fn locked(&self) -> MutexGuard<'_, T> {
        self.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// [`RwLock::read`] and [`RwLock::write`] that take a poisoned lock as it was left.
pub trait RwLockExt<T: ?Sized> {
    /// A read guard, whether or not a writer panicked.
    fn read_locked(&self) -> RwLockReadGuard<'_, T>;
    /// The write guard, whether or not a holder panicked.
    fn write_locked(&self) -> RwLockWriteGuard<'_, T>;
}

impl<T: ?Sized> RwLockExt<T> for RwLock<T> {
    fn read_locked(&self) -> RwLockReadGuard<'_, T> {
        self.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write_locked(&self) -> RwLockWriteGuard<'_, T> {
        self.write().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Runs `a` and `b` at once and returns both results: `a` on this thread, `b` on a thread
/// started for it, unless this thread finishes `a` before that thread has begun `b` (a new
/// thread can start milliseconds late on a busy machine), or none can be started: then this
/// thread runs `b` too, and the other finds nothing left. Either way each job runs exactly
/// once, and a job's panic goes on in the caller.
pub fn both<A: Send, B: Send>(
    a: impl FnOnce() -> A + Send,
    b: impl FnOnce() -> B + Send,
) -> (A, B) {
    let job = Mutex::new(Some(b));
    let done = Mutex::new(None);
    let run_b = || {
        let taken = job.locked().take();
        if let Some(b) = taken {
            *done.locked() = Some(b());
        }
    };
    std::thread::scope(|scope| {
        let helper = std::thread::Builder::new()
            .name("dsh-refs-both".into())
            .spawn_scoped(scope, run_b);
        let a = a();
        run_b();
        if let Ok(helper) = helper {
            if let Err(panic) = helper.join() {
                std::panic::resume_unwind(panic);
            }
        }
        let b = done.locked().take();
        match b {
            Some(b) => (a, b),
            // Unreachable: `b` was taken by one of the two, and a panic in it ended above.
            None => unreachable!("the second job neither ran nor panicked"),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// Each job runs once and its result comes back, whether the helper thread takes `b`
    /// or this thread does; while `a` runs long, the helper takes `b`.
    #[test]
    fn both_runs_each_job_once() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let runs = AtomicUsize::new(0);
        let here = std::thread::current().id();
        for _ in 0..50 {
            let (a, b) = both(
                || {
                    runs.fetch_add(1, Ordering::SeqCst);
                    "a"
                },
                || runs.fetch_add(1, Ordering::SeqCst) < 100,
            );
            assert_eq!(a, "a");
            assert!(b);
        }
        assert_eq!(runs.load(Ordering::SeqCst), 100);
        // `a` waits (up to 10 s, for a loaded machine) until the helper has begun `b`.
        let begun = std::sync::atomic::AtomicBool::new(false);
        let (_, b) = both(
            || {
                let start = std::time::Instant::now();
                while !begun.load(Ordering::SeqCst) && start.elapsed().as_secs() < 10 {
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
            },
            || {
                begun.store(true, Ordering::SeqCst);
                std::thread::current().id()
            },
        );
        assert_ne!(b, here);
    }

    #[test]
    fn a_panic_in_either_job_reaches_the_caller() {
        let a = std::panic::catch_unwind(|| both(|| panic!("a fails"), || 1));
        assert!(a.is_err());
        let b = std::panic::catch_unwind(|| {
            both(
                || std::thread::sleep(std::time::Duration::from_millis(50)),
                || -> u8 { panic!("b fails") },
            )
        });
        assert!(b.is_err());
    }

    #[test]
    fn a_poisoned_mutex_is_taken_as_it_was_left() {
        let shared = Arc::new(Mutex::new(vec![1]));
        let holder = shared.clone();
        let joined = std::thread::spawn(move || {
            let mut guard = holder.lock().unwrap();
            guard.push(2);
            panic!("a holder panics");
        })
        .join();
        assert!(joined.is_err());
        assert!(shared.is_poisoned());
        assert_eq!(*shared.locked(), [1, 2]);
        shared.locked().push(3);
        assert_eq!(shared.locked().len(), 3);
    }

    #[test]
    fn a_poisoned_rwlock_is_read_and_written() {
        let shared = Arc::new(RwLock::new(5));
        let holder = shared.clone();
        let joined = std::thread::spawn(move || {
            let _guard = holder.write().unwrap();
            panic!("a writer panics");
        })
        .join();
        assert!(joined.is_err());
        assert_eq!(*shared.read_locked(), 5);
        *shared.write_locked() = 6;
        assert_eq!(*shared.read_locked(), 6);
    }
}
