//! chunkers (fixed, Rabin, FastCDC, regression) and fingerprint functions
