// These tests exercise an adapter that compiles to an empty module without its trait.
#if !GRPC
#error("these tests need the GRPC trait: run swift test --enable-all-traits")
#endif
