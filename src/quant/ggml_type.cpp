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
    case GgmlType::Q2_K:
      return GgmlTypeInfo{"Q2_K", 256, 84};
    case GgmlType::Q3_K:
      return GgmlTypeInfo{"Q3_K", 256, 110};
    case GgmlType::IQ2_XXS:
      return GgmlTypeInfo{"IQ2_XXS", 256, 66};
    case GgmlType::IQ2_XS:
      return GgmlTypeInfo{"IQ2_XS", 256, 74};
    case GgmlType::IQ2_S:
      return GgmlTypeInfo{"IQ2_S", 256, 82};
    case GgmlType::IQ3_XXS:
      return GgmlTypeInfo{"IQ3_XXS", 256, 98};
    case GgmlType::IQ3_S:
      return GgmlTypeInfo{"IQ3_S", 256, 110};
    case GgmlType::IQ1_S:
      return GgmlTypeInfo{"IQ1_S", 256, 50};
    case GgmlType::IQ1_M:
      return GgmlTypeInfo{"IQ1_M", 256, 56};
    case GgmlType::IQ4_NL:
      return GgmlTypeInfo{"IQ4_NL", 32, 18};
    case GgmlType::IQ4_XS:
      return GgmlTypeInfo{"IQ4_XS", 256, 136};
    case GgmlType::TQ1_0:
      return GgmlTypeInfo{"TQ1_0", 256, 54};
    case GgmlType::TQ2_0:
      return GgmlTypeInfo{"TQ2_0", 256, 66};
    case GgmlType::MXFP4:
      return GgmlTypeInfo{"MXFP4", 32, 17};
    default:
      return std::nullopt;
  }
}

std::string ggml_type_name(uint32_t type) {
  switch (type) {
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
    case GgmlType::IQ4_NL:
    case GgmlType::IQ4_XS:
    case GgmlType::MXFP4:
    case GgmlType::Q2_K:
    case GgmlType::Q3_K:
    case GgmlType::TQ1_0:
    case GgmlType::TQ2_0:
    case GgmlType::IQ2_XXS:
    case GgmlType::IQ2_XS:
    case GgmlType::IQ2_S:
    case GgmlType::IQ3_XXS:
    case GgmlType::IQ3_S:
    case GgmlType::IQ1_S:
    case GgmlType::IQ1_M:
      return true;
    default:
      return false;
  }
}

}  // namespace vela
