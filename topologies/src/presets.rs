//! Preset topologies. (To be written by the presets work.)
