//! The one helper every task of the app loop is started through.
//!
//! Purpose: [`TaskSlot::spawn`] is the one place that starts background work: it cancels the
//! slot's previous task, gives the new one a fresh serial and a cancel token, and sends its
//! answer only if the token was not cancelled. Invariant: serials come from one counter per app
//! ([`Serials`]); at most one task per slot is wanted at a time. Proof: the unit tests of
//! `tasks.rs` (a stale answer is dropped, a cancelled task sends nothing).

use super::AppEvent;
use std::future::Future;
use tokio::sync::mpsc::UnboundedSender;
use tokio_util::sync::CancellationToken;

/// The one counter every task's serial is drawn from (one per app).
#[derive(Debug, Default)]
pub(crate) struct Serials(u64);

impl Serials {
    fn next(&mut self) -> u64 {
        self.0 += 1;
        self.0
    }
}

/// One kind of background task: the serial and the cancel token of the one started last.
#[derive(Debug, Default)]
pub(crate) struct TaskSlot {
    serial: u64,
    cancel: Option<CancellationToken>,
}

impl TaskSlot {
    /// Starts `work` off the loop as this slot's task: the previous one is cancelled, the new
    /// one gets a fresh serial and a token (`work` receives both), and what it answers goes to
    /// `tx` unless the token was cancelled meanwhile. Returns the serial.
    pub(crate) fn spawn<F>(
        &mut self,
        serials: &mut Serials,
        tx: &UnboundedSender<AppEvent>,
        work: impl FnOnce(u64, CancellationToken) -> F,
    ) -> u64
    where
        F: Future<Output = AppEvent> + Send + 'static,
    {
        self.cancel();
        let serial = serials.next();
        let cancel = CancellationToken::new();
        self.serial = serial;
        self.cancel = Some(cancel.clone());
        let answer = work(serial, cancel.clone());
        let tx = tx.clone();
        tokio::spawn(async move {
            let event = answer.await;
            if !cancel.is_cancelled() {
                let _ = tx.send(event);
            }
        });
        serial
    }

    /// Cancels the task in flight, if any: its answer, should it still come, is stale.
    pub(crate) fn cancel(&mut self) {
        if let Some(cancel) = self.cancel.take() {
            cancel.cancel();
        }
    }

    /// Whether an answer with `serial` is the current task's (and not a cancelled one's).
    pub(crate) fn is_current(&self, serial: u64) -> bool {
        self.cancel.is_some() && serial == self.serial
    }
}
