//! Change notifications (SPEC §10 "Changes"): `notifications/resources/list_changed` when what a
//! list would show changes, in the form each protocol era knows.
//!
//! Purpose: 2025-11-25 and older clients get the notification unsolicited on their connection
//! once they did `initialize` ([`start_unsolicited`]); 2026-07-28 has no connection state, so a
//! client asks for it with `subscriptions/listen` and gets it only on that stream ([`listen`]:
//! `rmcp` sends the acknowledgement first and tags every notification with the subscription's
//! id).
//!
//! Invariant: both look once every [`NOTIFY_EVERY`] (so at most about one notification a
//! second per connection or subscription) and notify exactly when the ids and labels in rank
//! order differ from what that client was last told (a connection: its last answer to
//! `resources/list` or notification, and nothing before it first listed; a subscription: the
//! list when it opened, then its last notification). Neither outlives its client: the unsolicited
//! loop ends when the connection closes, a subscription when its request is cancelled or its
//! stream goes away.
//! Proof: `tests/mcp/server.rs` (a session written while connected is announced) and
//! `tests/mcp/era.rs` (acknowledged first, tagged, only when asked for, none unsolicited at
//! 2026-07-28).

use super::server::Server;
use super::NOTIFY_EVERY;
use rmcp::service::{SubscriptionContext, SubscriptionSendError};
use rmcp::{Peer, RoleServer};

/// Starts the unsolicited notifier of one connection that did `initialize`.
pub(super) fn start_unsolicited(server: Server, peer: Peer<RoleServer>) {
    tokio::spawn(async move { unsolicited(server, peer).await });
}

/// Sends `list_changed` when what a list would show differs from what the host was last told,
/// only once the host has listed, until the connection closes.
async fn unsolicited(server: Server, peer: Peer<RoleServer>) {
    let mut tick = tokio::time::interval(NOTIFY_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if peer.is_transport_closed() {
            return;
        }
        if !server.has_listed() {
            continue;
        }
        let Ok(entries) = server.entries().await else {
            continue;
        };
        if server.tell(Server::fingerprint(&entries), false) {
            tracing::debug!("the session list changed");
            if peer.notify_resource_list_changed().await.is_err() {
                return;
            }
        }
    }
}

/// Serves one `subscriptions/listen` stream until the client cancels it or its input ends: a
/// `list_changed` (tagged by `rmcp` with the subscription's id) each time the list differs from
/// the last one this subscription saw.
pub(super) async fn listen(server: Server, context: SubscriptionContext) {
    if context.accepted().resources_list_changed != Some(true) {
        // Nothing this server sends was asked for: hold the stream open, silent.
        tokio::select! {
            () = context.cancelled() => {}
            () = server.input_ended() => {}
        }
        return;
    }
    server.start_background();
    let mut seen = server.entries().await.ok().map(|e| Server::fingerprint(&e));
    let mut tick = tokio::time::interval(NOTIFY_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tokio::select! {
            () = context.cancelled() => return,
            () = server.input_ended() => return,
            _ = tick.tick() => {}
        }
        let Ok(entries) = server.entries().await else {
            continue;
        };
        let now = Server::fingerprint(&entries);
        if seen == Some(now) {
            continue;
        }
        let first = seen.is_none();
        seen = Some(now);
        if first {
            continue;
        }
        match context.sink().notify_resource_list_changed().await {
            Ok(()) => tracing::debug!("the session list changed (subscription)"),
            Err(SubscriptionSendError::SubscriptionClosed) => return,
            Err(e) => {
                tracing::debug!(error = %e, "a subscription's notification failed");
                return;
            }
        }
    }
}
