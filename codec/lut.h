// The DF11 lookup tables (`U.luts`): decode rows followed by one code-length row, built exactly as
// the official get_luts builds them (codec/FORMAT.md, "Lookup tables").
#ifndef DF11_CODEC_LUT_H_
#define DF11_CODEC_LUT_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "codec/huffman.h"

namespace df11::codec {

// Returns n_luts * 256 bytes, row-major. kFailedPrecondition if the code needs more than 16
// pointer rows (pointer values would fall below 240 and read as symbols).
//
// Differences from the official builder, none of which changes how a valid stream decodes:
// - a root row without an entry at key 0 (a one-symbol histogram, where the official builder
//   crashes) starts with its first entry's value instead of an undefined one;
// - a pointer target that the official builder never registered (it raises) gets its row;
// - a 24-bit-prefix row never carries a pointer into its leading entries, so that garbage past
//   the end of a stream always decodes within 4 lookups.
absl::StatusOr<std::vector<uint8_t>> BuildLuts(const HuffmanCode& code);

}  // namespace df11::codec

#endif  // DF11_CODEC_LUT_H_
