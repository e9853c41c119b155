# Every third-party library df11d uses, from Debian 12's packages (tools/install-deps.sh).
find_package(Threads REQUIRED)
find_package(absl CONFIG REQUIRED)
# Debian's protobuf 3.21 ships no CMake config: module mode only. gRPC's config needs
# protobuf-compiler-grpc installed.
find_package(Protobuf REQUIRED)
find_package(gRPC CONFIG REQUIRED)
find_package(yaml-cpp CONFIG REQUIRED)
find_package(CURL REQUIRED)
find_package(OpenSSL REQUIRED)  # SHA-256 (df11 verify, hub downloads)
find_package(nlohmann_json CONFIG REQUIRED)
find_package(prometheus-cpp CONFIG REQUIRED)
find_package(PkgConfig REQUIRED)
pkg_check_modules(PCRE2 REQUIRED IMPORTED_TARGET libpcre2-8)
pkg_check_modules(UTF8PROC REQUIRED IMPORTED_TARGET libutf8proc)
pkg_check_modules(HTTPLIB REQUIRED IMPORTED_TARGET cpp-httplib)  # HTTP clients of tests and tools
find_package(Boost 1.74 REQUIRED)  # Beast and Asio (header-only): the daemon's HTTP listener
set(BLA_VENDOR OpenBLAS)
find_package(BLAS REQUIRED)
if(DF11_BUILD_TESTS)
  find_package(GTest CONFIG REQUIRED)
endif()
if(DF11_BUILD_BENCHMARKS)
  find_package(benchmark CONFIG REQUIRED)
endif()
