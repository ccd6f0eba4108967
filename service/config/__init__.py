"""Service settings: `Settings` from `SLUICE_*` variables, and Spark settings from the environment."""
