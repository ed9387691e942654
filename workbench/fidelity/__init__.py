"""The calibrated judge against measurements: public GPU measurements (``measurements``)."""
