//! How a whole read of a heavy file is cut into parts for the cores.
//!
//! Purpose: the pure arithmetic of `lines::read_lines_in_parts`: how many parts and threads a
//! file's length is worth, and where each part is cut before the cut is moved to a line's end.
//! Invariant: the cuts start at 0, never go back and end at the length. Proof: the tests below;
//! `lines::tests` read files in parts cut this way and join them into one read's lines.

/// The bytes of a part of a [`read_lines_in_parts`](super::lines::read_lines_in_parts) read:
/// small enough that the threads share the work evenly whatever a file's lines (a part holding a 12 MB record takes one thread a
/// while; the others take the next parts meanwhile), large enough that a part costs little
/// more than its bytes.
pub const PART_BYTES: u64 = 4 << 20;

/// How a whole read of `len` bytes is best done: in how many parts, on how many threads (one
/// part: read it on one thread, as [`read_lines`](super::lines::read_lines) does).
pub fn parts_for(len: u64) -> (usize, usize) {
    let parts = usize::try_from(len / PART_BYTES)
        .unwrap_or(usize::MAX)
        .clamp(1, 1024);
    if parts < 2 {
        return (1, 1);
    }
    // Asked only for a file worth it: it reads the process's CPU quota from the cgroup files.
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cores < 2 {
        return (1, 1);
    }
    (parts, cores.min(parts).min(64))
}

/// Where part `k` of `count` parts of `len` bytes read by `threads` threads is cut (before
/// being moved to a line's end). With a part or two per thread, the parts are of equal bytes:
/// they all start at once. With more, they shrink linearly (part `k` weighs `count - k`): a
/// thread that takes a part when the others are nearly done takes a small one, so the threads
/// end close together (the 60 MB session's last of 15 parts is 0.5 MB, not 4 MB).
pub(super) fn part_start(len: u64, count: usize, threads: usize, k: usize) -> u64 {
    let (len, count, k) = (u128::from(len), count as u128, k as u128);
    let cut = if count <= 2 * threads.max(1) as u128 {
        len * k / count
    } else {
        // The weights before part k: count + (count - 1) + … + (count - k + 1).
        let before = k * count - k * k.saturating_sub(1) / 2;
        len * before / (count * (count + 1) / 2)
    };
    u64::try_from(cut).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Cuts start at 0, never go back, stay within the file, and end each run of parts at its
    /// length; with many parts per thread the last part is the smallest, with few all are equal.
    #[test]
    fn parts_shrink_only_when_there_are_many_per_thread() {
        for len in [0, 1, 7, 1000, 60_139_348, u64::MAX / 3] {
            for count in 1..40 {
                for threads in 1..5 {
                    let cuts: Vec<u64> = (0..=count)
                        .map(|k| part_start(len, count, threads, k))
                        .collect();
                    assert_eq!(cuts[0], 0);
                    assert_eq!(cuts[count], len, "{len} {count} {threads}");
                    assert!(cuts.windows(2).all(|w| w[0] <= w[1]));
                }
            }
        }
        let size = |k: usize| part_start(60 << 20, 15, 2, k + 1) - part_start(60 << 20, 15, 2, k);
        assert!(size(14) < size(13) && size(1) < size(0));
        assert_eq!(size(14), (60 << 20) / 120);
        assert_eq!(part_start(10 << 20, 2, 2, 1), 5 << 20);
    }
}
