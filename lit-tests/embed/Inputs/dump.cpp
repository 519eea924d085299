// Writes the embedded bundle's bytes (decode::bundle_bytes(), bundle_size()) to the file argv[1].
#include <cstdio>

#include "decode.hpp"

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  std::FILE* f = std::fopen(argv[1], "wb");
  if (!f) return 1;
  const bool wrote = std::fwrite(decode::bundle_bytes(), 1, decode::bundle_size(), f) == decode::bundle_size();
  return std::fclose(f) == 0 && wrote ? 0 : 1;
}
