"""The probes: one module of pure functions each (base.py says what a probe provides;
registry.py names them). Nothing is imported here, so reading a probe's templates (config
validation does) costs no probe."""
