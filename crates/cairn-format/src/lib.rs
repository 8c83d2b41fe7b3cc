//! byte codecs of cairn's on-disk objects; no I/O
