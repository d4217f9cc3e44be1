#!/usr/bin/env bash
# Reproduces the tables of BENCHMARKS.md: generates the data (once, into target/bench-data/),
# then prints percentiles, floors and peak memory. Needs hyperfine, zstd and GNU time
# (`apt-get install hyperfine zstd time`). About 10 minutes on the 2-core machine the first time
# (generating the 100,000-session home takes ~1 minute, the big logs ~20 s).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --example measure
m=target/release/examples/measure
for n in 1000 10000 100000; do
  $m gen-home --sessions $n >/dev/null
done
for mb in 1 10 100; do
  for e in plain zstd; do
    $m gen-big --mb $mb --encoding $e >/dev/null
  done
done

echo "== list_candidates (per keystroke: 3 typed words, every prefix)"
for n in 1000 10000 100000; do
  $m candidates --sessions $n --rounds 20
  $m candidates --sessions $n --rounds 20 --live
done

echo "== TUI"
for n in 1000 10000 100000; do
  $m tui --sessions $n --rounds 20
done

echo "== prepare, 3 sources"
for mb in 1 10 100; do
  for e in plain zstd; do
    $m prepare --mb $mb --encoding $e --iters 10
  done
done

echo "== floors: read (cat) and decompress (zstd -dc) the same three files"
for mb in 1 10 100; do
  p=target/bench-data/big-${mb}mb-plain-seqs/sessions/--home-dev-work-big--
  z=target/bench-data/big-${mb}mb-zstd-seqs/sessions/--home-dev-work-big--
  hyperfine -N --warmup 3 --runs 20 \
    "cat $p/big-source-a/session.jsonl $p/big-source-b/session.jsonl $p/big-source-c/session.jsonl" \
    "zstd -dcq --no-asyncio $z/big-source-a/session.jsonl.zstd $z/big-source-b/session.jsonl.zstd $z/big-source-c/session.jsonl.zstd" \
    2>&1 | grep -E "Benchmark|Time"
done

echo "== peak memory of one prepare (3 × 100 MB)"
for e in plain zstd; do
  /usr/bin/time -v $m prepare --mb 100 --encoding $e --iters 1 2>&1 \
    | grep -E "prepare cold|Maximum resident"
done
