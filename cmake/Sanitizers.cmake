# -DDF11_SANITIZE=address,undefined builds everything with those sanitizers; UBSan findings abort.
# -DDF11_SANITIZE=thread: ThreadSanitizer (tools/test.sh runs the tests labelled tsan with it).
if(DF11_SANITIZE)
  add_compile_options(-fsanitize=${DF11_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_link_options(-fsanitize=${DF11_SANITIZE})
  if(DF11_SANITIZE MATCHES "thread")
    # ThreadSanitizer does not model fences (GCC refuses them under -Werror); Asio's handler
    # hand-offs are ordered by its scheduler's mutex as well, which it does see.
    add_compile_definitions(BOOST_ASIO_DISABLE_FENCED_BLOCK)
  endif()
endif()

# df11_sanitizer_support(TARGET): what an executable needs under the configured sanitizers. With
# ThreadSanitizer, the annotations of Abseil's locks (tsan/absl_sync_annotations.cc says why).
function(df11_sanitizer_support target)
  if(DF11_SANITIZE MATCHES "thread")
    target_sources(${target} PRIVATE ${PROJECT_SOURCE_DIR}/cmake/tsan/absl_sync_annotations.cc)
    target_link_libraries(${target} PRIVATE absl::synchronization ${CMAKE_DL_LIBS})
  endif()
endfunction()
