//! The allocator: mimalloc 2.x, and its two settings, for the binary and the benchmark's floor.
//!
//! Why mimalloc: a poll allocates on one worker thread and frees on another (a request's
//! buffers, the snapshot the encoder drops). With glibc's malloc both threads then took an
//! arena's lock: at N = 1000 the allocator and `memcpy` were a fifth of the exporter's CPU
//! against an eighth of the floor's, glibc's arena lock 211 profile samples against 54
//! (docs/bench/profile-n1000.md). mimalloc frees into per-thread pages without a lock. Measured
//! at once beside the glibc build (docs/performance.md, "The floor"), it took 6–8 % off the
//! exporter's CPU per poll cycle.
//!
//! Why these settings: with mimalloc's defaults the exporter held 77 MiB at N = 1000 against
//! glibc's 58, over the 64 MiB it promises. Two settings took it to 61–63 MiB:
//! - transparent huge pages off for the process: mimalloc asks for them on its large regions,
//!   and a 2 MiB page stays resident for a few live bytes (77 → 65 MiB);
//! - freed pages given back at once (`purge_delay` 0, 10 ms by default; 65 → 62 MiB).
//!
//! Why 2.x and not 3.x (the `mimalloc` crate's default, without its `v2` feature), with the
//! same two settings: measured at once beside this build at N = 1000, 4 rounds, each build's
//! floor in turn (`SIZES=1000 ROUNDS=2 CYCLES=12 EXPORTER=<3.x> EXPORTER_B=<2.x>
//! FLOOR=<3.x's, then 2.x's floor> scripts/bench.sh fleet`; rows `mimalloc3-vs-2-*` of
//! docs/bench/fleet-compare.csv), 3.x took 0.3–2.4 % off the exporter's CPU per cycle but
//! stood as far from a floor built with it (1.41 × in both rounds, 2.x 1.38 and 1.43 × from
//! its own), and held 62.3–63.5 MiB against 60.8–62.6: no nearer the floor, nearer the 64 MiB.
//!
//! A library cannot choose the allocator of a program: each binary declares
//! `#[global_allocator] static ALLOCATOR: mimalloc::MiMalloc` and calls [`configure`] first
//! in `main`. The floor does both, so what the allocator saves is not counted as the
//! exporter's own.

/// mimalloc.h's `mi_option_purge_delay` in 2.x's `mi_option_e`, written here because
/// libmimalloc-sys 0.1.49 names only the options of older releases (the index is checked
/// against mimalloc's own reading of `MIMALLOC_PURGE_DELAY` in the tests).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Sets the allocator up: freed pages returned at once, no transparent huge pages. Call it
/// first in `main`, before any other thread exists (`mi_option_set` is not thread safe).
pub fn configure() {
    // SAFETY: called before any other thread exists, as mi_option_set requires; an option
    // index mimalloc does not know is ignored by it.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, 0) };
    #[cfg(target_os = "linux")]
    // SAFETY: PR_SET_THP_DISABLE only sets a flag of this process's memory map; a kernel
    // without it answers EINVAL, which is ignored (the RSS is then only larger).
    unsafe {
        libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The child's side of the test below: the value mimalloc read for the option index.
    const CHILD: &str = "ALLOCATOR_TEST_CHILD";

    /// Index 15 is `purge_delay`: a child process started with `MIMALLOC_PURGE_DELAY=37`
    /// reads 37 there (mimalloc reads its options from the environment once, at start).
    #[test]
    fn the_purge_delay_index_is_mimallocs() {
        if std::env::var_os(CHILD).is_some() {
            // SAFETY: mi_option_get only reads an option.
            let value = unsafe { libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY) };
            println!("purge_delay={value}");
            return;
        }
        let output = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "allocator::tests::the_purge_delay_index_is_mimallocs",
                "--nocapture",
            ])
            .env(CHILD, "1")
            .env("MIMALLOC_PURGE_DELAY", "37")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(output.status.success(), "{stdout}");
        assert!(stdout.contains("purge_delay=37"), "{stdout}");
    }

    #[test]
    fn configure_sets_the_purge_delay_to_zero() {
        configure();
        // SAFETY: mi_option_get only reads an option.
        assert_eq!(
            unsafe { libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY) },
            0
        );
    }
}
