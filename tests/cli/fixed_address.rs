//! The `dsh-refs` binary is linked at a fixed address on Linux with glibc (`build.rs`,
//! `fixed_address_binary`): its start then applies no relative relocations, which every
//! one-shot command would pay for (BENCHMARKS.md, stop 50).

/// The binary's ELF header says `ET_EXEC` (a fixed-address executable), not `ET_DYN` (what a
/// position-independent executable is).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[test]
fn the_binary_is_a_fixed_address_executable() {
    use std::io::Read;
    let mut header = [0u8; 18];
    std::fs::File::open(env!("CARGO_BIN_EXE_dsh-refs"))
        .and_then(|mut file| file.read_exact(&mut header))
        .expect("read the binary's ELF header");
    assert_eq!(&header[..4], b"\x7fELF", "not an ELF file");
    // `e_type`, after the 16 bytes of `e_ident`; ELF on Linux x86_64 and aarch64 is
    // little-endian.
    let kind = u16::from_le_bytes([header[16], header[17]]);
    assert_eq!(
        kind, 2,
        "e_type {kind}: 2 is ET_EXEC, 3 (ET_DYN) a position-independent one"
    );
}
