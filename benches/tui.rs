//! The `@` popup over 100,000 sessions: one frame (composer + open popup, 120×40 TestBackend), and
//! one keystroke (composer edit, popup sync, frame) while the lookup runs elsewhere.
//!
//! ```sh
//! cargo bench --bench tui
//! ```

mod support;

use criterion::{criterion_group, criterion_main, Criterion};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use dsh_session_references::reference::{AgentIdentity, SessionReferenceConfig, SessionReferences};
use dsh_session_references::session::DiskStore;
use dsh_session_references::tui::composer::Composer;
use dsh_session_references::tui::popup::PopupState;
use dsh_session_references::tui::Renderable;
use ratatui::backend::TestBackend;
use ratatui::layout::Rect;
use ratatui::Terminal;
use std::sync::Arc;
use std::time::Duration;
use support::gen;
use tokio_util::sync::CancellationToken;

const NOW: i64 = 1_700_006_000_000;

fn draw(terminal: &mut Terminal<TestBackend>, composer: &Composer, popup: &PopupState) {
    terminal
        .draw(|frame| {
            let area = frame.area();
            let buf = frame.buffer_mut();
            let composer_h = composer.desired_height(area.width).min(area.height);
            composer.render(
                Rect::new(0, area.height - composer_h, area.width, composer_h),
                buf,
            );
            let view = popup.view(NOW);
            let h = view
                .desired_height(area.width)
                .min(area.height - composer_h);
            view.render(
                Rect::new(0, area.height - composer_h - h, area.width, h),
                buf,
            );
        })
        .unwrap();
}

fn tui(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let home = gen::cached_home(100_000).unwrap();
    let service = SessionReferences::new(
        Arc::new(DiskStore::new(&home)),
        SessionReferenceConfig::default(),
    )
    .unwrap();
    let agent = AgentIdentity::new("agent-self", Some(gen::project_cwd(3)));
    let cancel = CancellationToken::new();
    let mut terminal = Terminal::new(TestBackend::new(120, 40)).unwrap();
    let mut composer = Composer::new();
    let mut popup = PopupState::new();
    for ch in "see @har".chars() {
        composer.handle_key(KeyEvent::new(KeyCode::Char(ch), KeyModifiers::NONE));
    }
    let request = popup.sync(composer.active_token().as_ref()).unwrap();
    let answer = rt
        .block_on(service.list_candidates(&agent, &request.query, None, &cancel))
        .map_err(|e| e.to_string());
    popup.apply_results(request.id, answer);

    c.bench_function("tui/frame_popup_open", |b| {
        b.iter(|| draw(&mut terminal, &composer, &popup))
    });
    c.bench_function("tui/keystroke_to_frame", |b| {
        let mut k = 0usize;
        b.iter(|| {
            // Alternate typing a character and deleting it, so the popup stays open.
            let key = if k.is_multiple_of(2) {
                KeyEvent::new(KeyCode::Char('n'), KeyModifiers::NONE)
            } else {
                KeyEvent::new(KeyCode::Backspace, KeyModifiers::NONE)
            };
            k += 1;
            composer.handle_key(key);
            let request = popup.sync(composer.active_token().as_ref());
            draw(&mut terminal, &composer, &popup);
            request
        })
    });
}

/// The group `criterion_main!` runs, in a module of its own: `criterion_group!` makes a `pub fn`
/// that it gives no way to document (`missing_docs`), and here it is not public.
mod group {
    use super::*;

    criterion_group! {
        name = benches;
        config = Criterion::default().sample_size(30).measurement_time(Duration::from_secs(3));
        targets = tui
    }
}
criterion_main!(group::benches);
