# -DDF11_SANITIZE=address,undefined builds everything with those sanitizers; UBSan findings abort.
if(DF11_SANITIZE)
  add_compile_options(-fsanitize=${DF11_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_link_options(-fsanitize=${DF11_SANITIZE})
endif()
