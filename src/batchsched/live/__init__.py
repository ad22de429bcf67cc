"""Live mode: informers, actuator, leader election, metrics. All I/O, threads and clocks of a
running scheduler live here; the core never imports this package."""
