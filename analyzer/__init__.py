"""psrec.analyzer: turns .psr recordings into reports and exports."""
