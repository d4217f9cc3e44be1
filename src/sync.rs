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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

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
