//! Shared by the benchmarks: the home and log generators.
#![allow(dead_code)]

pub mod gen;
