#include "quant/ggml_type.h"

#include <string>

namespace vela {

std::optional<GgmlTypeInfo> ggml_type_info(uint32_t type) {
  switch (static_cast<GgmlType>(type)) {
    case GgmlType::F32:
      return GgmlTypeInfo{"F32", 1, 4};
    case GgmlType::F16:
      return GgmlTypeInfo{"F16", 1, 2};
    case GgmlType::BF16:
      return GgmlTypeInfo{"BF16", 1, 2};
    case GgmlType::Q4_0:
      return GgmlTypeInfo{"Q4_0", 32, 18};
    case GgmlType::Q4_1:
      return GgmlTypeInfo{"Q4_1", 32, 20};
    case GgmlType::Q5_0:
      return GgmlTypeInfo{"Q5_0", 32, 22};
    case GgmlType::Q5_1:
      return GgmlTypeInfo{"Q5_1", 32, 24};
    case GgmlType::Q8_0:
      return GgmlTypeInfo{"Q8_0", 32, 34};
    case GgmlType::Q8_1:
      return GgmlTypeInfo{"Q8_1", 32, 36};
    case GgmlType::Q4_K:
      return GgmlTypeInfo{"Q4_K", 256, 144};
    case GgmlType::Q5_K:
      return GgmlTypeInfo{"Q5_K", 256, 176};
    case GgmlType::Q6_K:
      return GgmlTypeInfo{"Q6_K", 256, 210};
    case GgmlType::Q8_K:
      return GgmlTypeInfo{"Q8_K", 256, 292};
    default:
      return std::nullopt;
  }
}

std::string ggml_type_name(uint32_t type) {
  switch (type) {
    case 10:
      return "Q2_K";
    case 11:
      return "Q3_K";
    case 16:
      return "IQ2_XXS";
    case 17:
      return "IQ2_XS";
    case 18:
      return "IQ3_XXS";
    case 19:
      return "IQ1_S";
    case 20:
      return "IQ4_NL";
    case 21:
      return "IQ3_S";
    case 22:
      return "IQ2_S";
    case 23:
      return "IQ4_XS";
    case 24:
      return "I8";
    case 25:
      return "I16";
    case 26:
      return "I32";
    case 27:
      return "I64";
    case 28:
      return "F64";
    case 29:
      return "IQ1_M";
    case 34:
      return "TQ1_0";
    case 35:
      return "TQ2_0";
    default:
      break;
  }
  if (auto info = ggml_type_info(type)) return std::string(info->name);
  return "type " + std::to_string(type);
}

bool is_supported_weight_type(uint32_t type) {
  switch (static_cast<GgmlType>(type)) {
    case GgmlType::F32:
    case GgmlType::F16:
    case GgmlType::BF16:
    case GgmlType::Q4_0:
    case GgmlType::Q4_1:
    case GgmlType::Q5_0:
    case GgmlType::Q5_1:
    case GgmlType::Q8_0:
    case GgmlType::Q4_K:
    case GgmlType::Q5_K:
    case GgmlType::Q6_K:
      return true;
    default:
      return false;
  }
}

}  // namespace vela
