# Writes the C++ source that holds the chat page's files, run at build time with CMake alone:
#   cmake -DSOURCE_DIR=<dir> -DFILES=index.html,app.js,... -DOUTPUT=<file.cpp> -P embed_web_assets.cmake
# Each file becomes a byte array with the URL path it is served at (index.html at "/", the others
# at "/webui/NAME") and its Content-Type, listed in the order given.
cmake_minimum_required(VERSION 3.25)
foreach(var SOURCE_DIR FILES OUTPUT)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "embed_web_assets.cmake: -D${var}=... is required")
  endif()
endforeach()
string(REPLACE "," ";" files "${FILES}")

string(REPEAT "0x..," 16 line_of_bytes)  # CMake's regexes have no {n}
set(arrays "")
set(entries "")
set(index 0)
foreach(name IN LISTS files)
  if(name MATCHES "\\.html$")
    set(type "text/html; charset=utf-8")
  elseif(name MATCHES "\\.js$")
    set(type "text/javascript; charset=utf-8")
  elseif(name MATCHES "\\.css$")
    set(type "text/css; charset=utf-8")
  elseif(name MATCHES "\\.svg$")
    set(type "image/svg+xml")
  else()
    message(FATAL_ERROR "embed_web_assets.cmake: no Content-Type known for ${name}")
  endif()
  if(name STREQUAL "index.html")
    set(url "/")
  else()
    set(url "/webui/${name}")
  endif()
  file(READ "${SOURCE_DIR}/${name}" hex HEX)
  # "3c21..." -> "0x3c,0x21,...", 16 bytes a line; a trailing 0 keeps an empty file's array legal.
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
  string(REGEX REPLACE "(${line_of_bytes})" "\\1\n    " bytes "${bytes}")
  string(APPEND arrays "// ${name}\nconst unsigned char kAsset${index}[] = {\n    ${bytes}0x00};\n\n")
  string(APPEND entries "    {\"${url}\", \"${type}\", bytes_of(kAsset${index}, sizeof kAsset${index} - 1)},\n")
  math(EXPR index "${index} + 1")
endforeach()

set(text "// Generated at build time by src/server/webui/embed_web_assets.cmake from the files in
// src/server/webui/: edit those, not this.
#include <cstddef>

#include \"server/webui/webui_assets.h\"

namespace vela::server {
namespace {

std::string_view bytes_of(const unsigned char* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

${arrays}const WebAsset kAssets[] = {
${entries}};

}  // namespace

std::span<const WebAsset> web_assets() {
  return kAssets;
}

}  // namespace vela::server
")
file(WRITE "${OUTPUT}" "${text}")
