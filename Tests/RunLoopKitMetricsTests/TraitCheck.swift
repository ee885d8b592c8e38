// These tests exercise an adapter that compiles to an empty module without its trait.
#if !Metrics
#error("these tests need the Metrics trait: run swift test --enable-all-traits")
#endif
