//! Importer for `nvidia-smi topo -m`. (To be written by the importer work.)
