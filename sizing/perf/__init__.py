"""Performance physics of one replica: memory fit (`memory`), one engine step (`step`), serving under
load (`load`), goodput at the SLO (`goodput`), the step-level scheduler simulation (`sim`), the fitted
constants (`calibration`, `overlay`), what binds (`binding`), checkpoint size and cold start.
"""
