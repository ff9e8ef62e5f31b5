// Compiled only to produce libtorch's precompiled header, which every torch target of the runtime
// reuses (runtime/CMakeLists.txt).
