//! The composer holding 1 MiB of inserted text (a paste that large is shown collapsed; this
//! measures the text itself): one frame (height, draw, cursor, as the app asks for each frame)
//! and one edit (Backspace then Left, whole grapheme clusters), for plain ASCII and for emoji
//! text (ZWJ families and skin tones, where clusters span several characters).
//!
//! ```sh
//! cargo bench --bench composer
//! ```

use criterion::{criterion_group, criterion_main, Criterion};
use dsh_session_references::tui::composer::Composer;
use dsh_session_references::tui::Renderable;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use std::time::Duration;

const MIB: usize = 1 << 20;

fn pasted(unit: &str) -> Composer {
    let mut composer = Composer::new();
    composer.insert_str(&unit.repeat(MIB / unit.len()));
    composer
}

fn frame(composer: &Composer) {
    let area = Rect::new(0, 0, 120, 12);
    let height = composer.desired_height(area.width).min(area.height);
    let mut buf = Buffer::empty(area);
    composer.render(Rect { height, ..area }, &mut buf);
    std::hint::black_box(composer.cursor_position(area));
}

fn composer(c: &mut Criterion) {
    for (name, unit) in [
        ("ascii", "abcd efgh "),
        (
            "emoji",
            "\u{1f468}\u{200d}\u{1f469}\u{200d}\u{1f467} \u{1f44d}\u{1f3fd} ",
        ),
    ] {
        let mut composer = pasted(unit);
        c.bench_function(&format!("composer/frame_1mib_{name}"), |b| {
            b.iter(|| frame(&composer))
        });
        c.bench_function(&format!("composer/edit_1mib_{name}"), |b| {
            b.iter(|| {
                // Delete a cluster and step over another; top the text up now and then.
                if composer.is_blank() || composer.cursor() < 64 {
                    composer = pasted(unit);
                }
                composer.backspace();
                composer.move_left();
            })
        });
    }
}

/// The group `criterion_main!` runs, in a module of its own: `criterion_group!` makes a `pub fn`
/// that it gives no way to document (`missing_docs`), and here it is not public.
mod group {
    use super::*;

    criterion_group! {
        name = benches;
        config = Criterion::default().sample_size(20).measurement_time(Duration::from_secs(3));
        targets = composer
    }
}
criterion_main!(group::benches);
