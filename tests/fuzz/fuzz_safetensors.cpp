// Fuzz target: read_safetensors, read_safetensors_metadata and read_safetensors_header
// on a file of the input's bytes. A heed::Error is the expected answer to a bad file; anything else escaping (a
// nlohmann exception, std::bad_alloc), a sanitizer report or a hang is a finding. A file
// that reads must also survive a round trip: save_safetensors writes it back and
// read_safetensors returns the same records and metadata.
#include "fuzz_common.hpp"

#include <heed/core/error.hpp>
#include <heed/io/safetensors.hpp>

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace {

bool same(const heed::SafetensorsFile& a, const heed::SafetensorsFile& b) {
  if (a.metadata != b.metadata || a.tensors.size() != b.tensors.size()) return false;
  for (const auto& [name, record] : a.tensors) {
    const auto it = b.tensors.find(name);
    if (it == b.tensors.end() || it->second.dtype != record.dtype || it->second.shape != record.shape ||
        it->second.data != record.data)
      return false;
  }
  return true;
}

// A record of T's dtype must convert (or refuse with a heed::Error, for a rank over 6).
template <typename T>
void convert(const heed::TensorRecord& record) {
  if (record.dtype != heed::detail::safetensors_dtype<T>()) return;
  try {
    const heed::Tensor<T> tensor = record.to_tensor<T>();
    if (static_cast<std::size_t>(tensor.numel()) * sizeof(T) != record.data.size())
      heed_fuzz::fail("to_tensor: the tensor's size differs from the record's");
  } catch (const heed::Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const heed_fuzz::InputFile input("safetensors", ".safetensors");
  static const heed_fuzz::InputFile copy("safetensors_copy", ".safetensors");
  const std::string& path = input.write(data, size);

  bool read = false, metadata_read = false, header_read = false;
  heed::SafetensorsFile file;
  std::map<std::string, std::string> metadata;
  heed::SafetensorsHeader header;
  try {
    file = heed::read_safetensors(path);
    read = true;
  } catch (const heed::Error&) {
  }
  try {
    metadata = heed::read_safetensors_metadata(path);
    metadata_read = true;
  } catch (const heed::Error&) {
  }
  try {
    header = heed::read_safetensors_header(path);
    header_read = true;
  } catch (const heed::Error&) {
  }
  // All validate the whole header; read_safetensors reads the tensors' bytes besides
  // (and checks their checksums), so it may refuse a file the others accept, never the
  // other way round; the other two read the same.
  if (read && !metadata_read) heed_fuzz::fail("read_safetensors_metadata refused a file read_safetensors read");
  if (metadata_read != header_read) heed_fuzz::fail("read_safetensors_header and read_safetensors_metadata disagree");
  if (header_read && header.metadata != metadata) heed_fuzz::fail("read_safetensors_header returned other metadata");
  if (!read) return 0;
  if (metadata != file.metadata) heed_fuzz::fail("read_safetensors_metadata returned other metadata");
  if (header.tensors.size() != file.tensors.size()) heed_fuzz::fail("read_safetensors_header has other tensors");
  for (const auto& [name, record] : file.tensors) {
    const auto it = header.tensors.find(name);
    if (it == header.tensors.end() || it->second.dtype != record.dtype || it->second.shape != record.shape)
      heed_fuzz::fail("read_safetensors_header describes tensor '" + name + "' other than read_safetensors reads it");
  }

  for (const auto& [name, record] : file.tensors) {
    convert<float>(record);
    convert<double>(record);
    convert<std::int64_t>(record);
    convert<std::int32_t>(record);
  }

  // What the reader accepts the writer must write back, and the copy must read the same.
  std::vector<std::pair<std::string, heed::TensorRecord>> records(file.tensors.begin(), file.tensors.end());
  try {
    heed::save_safetensors(copy.path(), records, file.metadata);
  } catch (const heed::Error& e) {
    heed_fuzz::fail(std::string("save_safetensors refused what read_safetensors accepted: ") + e.what());
  }
  heed::SafetensorsFile again;
  try {
    again = heed::read_safetensors(copy.path());
  } catch (const heed::Error& e) {
    heed_fuzz::fail(std::string("read_safetensors refused what save_safetensors wrote: ") + e.what());
  }
  if (!same(file, again)) heed_fuzz::fail("a safetensors file changed in a save/read round trip");
  return 0;
}
