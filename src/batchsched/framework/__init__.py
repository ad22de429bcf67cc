"""The plugin contract (`interface`) and the runtime that runs a profile's plugins."""
