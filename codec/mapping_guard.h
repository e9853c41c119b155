// Read-only file mappings that survive their file being truncated under them. Reading a mapped
// page past a file's end raises SIGBUS, which kills the process; a daemon that maps model files
// must not die because someone rewrote one in place. With the guard installed, a SIGBUS inside a
// registered mapping replaces the faulting page with zeros (an anonymous page), records the fault
// for that mapping and lets the read go on; a SIGBUS anywhere else goes to the action that was in
// place before. What was read from such a mapping is garbage, so its owner checks MappingFaulted
// (SafetensorsFile::CheckUnchanged does) and fails whatever used it.
//
//   InstallMappingGuard();                  // once, in a program that maps files it serves
//   const int slot = GuardMapping(addr, size);
//   ... if (MappingFaulted(slot)) ... the bytes are not the file's
//   UnguardMapping(slot);                   // before munmap
#ifndef DF11_CODEC_MAPPING_GUARD_H_
#define DF11_CODEC_MAPPING_GUARD_H_

#include <cstddef>

namespace df11::codec {

// Installs the SIGBUS handler; later calls do nothing. Thread-safe.
void InstallMappingGuard();

// Registers [addr, addr + size), a read-only mapping of a file. The slot to pass to the other
// functions, or -1 when the table (4096 mappings) is full: that mapping is then unguarded.
// Thread-safe and lock-free, like the handler that reads the table.
int GuardMapping(const void* addr, size_t size);
// Forgets a slot (-1 is ignored). Call before unmapping.
void UnguardMapping(int slot);
// Whether a SIGBUS in the slot's range was absorbed since it was registered (false for -1).
bool MappingFaulted(int slot);

}  // namespace df11::codec

#endif  // DF11_CODEC_MAPPING_GUARD_H_
