# SPDX-License-Identifier: BSD-3-Clause
"""stripebench: the nbdstripe bench harness behind bench/stripe-bench.

  util      units, sizes, processes, CPU accounting from /proc
  profiles  the CrystalDiskMark-style profiles and the acceptance targets
  members   emulated (throttled loop devices), real and remote members;
            the calibration of the emulation
  fio       one fio run with its CPU window; one measured row
  scrub     --scrub-during: a scrub kept running through a plugin run
  runner    servers, the phases of a run, the results document, cleanup
  results   medians and spread over repetitions, results.json/.csv, summary.md
  charts    the gnuplot charts, from a results document alone (--replot)
  cli       options and main()

Debian's /usr/bin/python3, standard library only (charts need gnuplot)."""
