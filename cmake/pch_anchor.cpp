// Anchor translation unit for the shared libtorch precompiled header (see torch_target.cmake).
