//! One selection-and-scroll state for every list of the bundle (the `@` popup, the `/` menu,
//! the card picker): a selected row and the first visible row.
//!
//! Invariant: after any move with `len > 0` rows and a window of `cap ≥ 1` rows, the selection
//! is a row (`selected < len`) and it is on screen (`top ≤ selected < top + cap`), and `top`
//! never leaves rows unused below the last one. Moves wrap at the ends; pages stop at them.
//! Proof: the unit tests below, including a property test over random moves.

/// The selected row and the first visible row of a list.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ScrollState {
    /// The selected row (0 when the list is empty).
    pub selected: usize,
    /// The first visible row.
    pub top: usize,
}

impl ScrollState {
    /// Back to the first row.
    pub fn reset(&mut self) {
        *self = ScrollState::default();
    }

    /// Up one row, from the first to the last.
    pub fn move_up_wrap(&mut self, len: usize, cap: usize) {
        if len == 0 {
            return;
        }
        self.selected = if self.selected == 0 {
            len - 1
        } else {
            self.selected.min(len) - 1
        };
        self.ensure_visible(len, cap);
    }

    /// Down one row, from the last to the first.
    pub fn move_down_wrap(&mut self, len: usize, cap: usize) {
        if len == 0 {
            return;
        }
        self.selected = (self.selected + 1) % len;
        self.ensure_visible(len, cap);
    }

    /// Up one window, stopping at the first row.
    pub fn page_up(&mut self, len: usize, cap: usize) {
        if len == 0 {
            return;
        }
        self.selected = self.selected.saturating_sub(cap.max(1)).min(len - 1);
        self.ensure_visible(len, cap);
    }

    /// Down one window, stopping at the last row.
    pub fn page_down(&mut self, len: usize, cap: usize) {
        if len == 0 {
            return;
        }
        self.selected = (self.selected + cap.max(1)).min(len - 1);
        self.ensure_visible(len, cap);
    }

    /// Selects row `index`, clamped to the list.
    pub fn select(&mut self, index: usize, len: usize, cap: usize) {
        if len == 0 {
            return;
        }
        self.selected = index.min(len - 1);
        self.ensure_visible(len, cap);
    }

    /// Moves `top` as little as possible so the selection shows in a window of `cap` rows.
    pub fn ensure_visible(&mut self, len: usize, cap: usize) {
        self.top = visible_top(self.top, self.selected, cap, len);
    }
}

/// The first visible row closest to `top` that shows `selected` in a window of `cap` rows.
pub fn visible_top(top: usize, selected: usize, cap: usize, len: usize) -> usize {
    if len == 0 || cap == 0 {
        return 0;
    }
    let mut top = top.min(len.saturating_sub(cap));
    if selected < top {
        top = selected;
    } else if selected >= top + cap {
        top = selected + 1 - cap;
    }
    top
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn moves_wrap_and_pages_stop() {
        let mut s = ScrollState::default();
        s.move_up_wrap(5, 3);
        assert_eq!(
            s,
            ScrollState {
                selected: 4,
                top: 2
            }
        );
        s.move_down_wrap(5, 3);
        assert_eq!(
            s,
            ScrollState {
                selected: 0,
                top: 0
            }
        );
        s.page_down(5, 3);
        assert_eq!(
            s,
            ScrollState {
                selected: 3,
                top: 1
            }
        );
        s.page_down(5, 3);
        assert_eq!(s.selected, 4);
        s.page_up(5, 3);
        assert_eq!(
            s,
            ScrollState {
                selected: 1,
                top: 1
            }
        );
        s.page_up(5, 3);
        assert_eq!(
            s,
            ScrollState {
                selected: 0,
                top: 0
            }
        );
        s.move_up_wrap(0, 3);
        assert_eq!(s, ScrollState::default(), "an empty list changes nothing");
    }

    proptest! {
        #[test]
        fn selection_stays_a_visible_row(
            moves in proptest::collection::vec(0u8..5, 0..60),
            len in 1usize..40,
            cap in 1usize..10,
        ) {
            let mut s = ScrollState::default();
            for m in moves {
                match m {
                    0 => s.move_up_wrap(len, cap),
                    1 => s.move_down_wrap(len, cap),
                    2 => s.page_up(len, cap),
                    3 => s.page_down(len, cap),
                    _ => s.select(usize::from(m) * 7, len, cap),
                }
                prop_assert!(s.selected < len);
                prop_assert!(s.top <= s.selected && s.selected < s.top + cap);
                prop_assert!(s.top <= len.saturating_sub(cap));
            }
        }
    }
}
