#include "cost_models/generators.h"

#include <fmt/format.h>

namespace twinpipe::cost {

Model GenerateTransformer(const TransformerSpec& t) {
  const double S = t.seq, d = t.d_model, f = t.ffn, V = t.vocab, h = t.heads;
  const double e = DtypeBytes(t.dtype);
  Model m;
  m.dtype = t.dtype;
  m.input_bytes = S * 4;  // int32 token ids
  m.layers.push_back(Layer{.name = "embedding",
                           .kind = "embedding",
                           .fwd_flops = S * d,  // adds the position embedding
                           .bwd_input_flops = 0,
                           .bwd_weight_flops = S * d,
                           .params = V * d + S * d,
                           .out_bytes = S * d * e,
                           .stash_bytes = S * 4});
  const double matmul = 8 * S * d * d + 4 * S * d * f;
  for (int i = 0; i < t.layers; ++i) {
    m.layers.push_back(Layer{.name = fmt::format("block{}", i),
                             .kind = "transformer_block",
                             .fwd_flops = matmul + 4 * S * S * d,
                             .bwd_input_flops = matmul + 8 * S * S * d,
                             .bwd_weight_flops = matmul,
                             .params = 4 * d * d + 2 * d * f + f + 9 * d,
                             .out_bytes = S * d * e,
                             .stash_bytes = S * d * (34 + 5 * h * S / d) * (e / 2)});
  }
  m.layers.push_back(Layer{.name = "head",
                           .kind = "head",
                           .fwd_flops = 2 * S * d * V,
                           .bwd_input_flops = 2 * S * d * V,
                           .bwd_weight_flops = 2 * S * d * V,
                           .params = d * V + V + 2 * d,
                           .out_bytes = 4,  // the loss
                           .stash_bytes = S * d * e + S * V * 4});
  return m;
}

Model GenerateMlp(const MlpSpec& s) {
  const double w = s.width, in = s.input, c = s.classes, e = DtypeBytes(s.dtype);
  const double norm_params = s.norm == Norm::kNone ? 0 : 2 * w;
  Model m;
  m.dtype = s.dtype;
  m.input_bytes = in * e;
  m.layers.push_back(Layer{.name = "input",
                           .kind = "linear",
                           .fwd_flops = 2 * in * w,
                           .bwd_input_flops = 2 * in * w,
                           .bwd_weight_flops = 2 * in * w,
                           .params = in * w + w,
                           .out_bytes = w * e,
                           .stash_bytes = (in + w) * e});
  for (int i = 1; i + 1 < s.layers; ++i) {
    m.layers.push_back(Layer{.name = fmt::format("block{}", i),
                             .kind = s.residual ? "residual_block" : "block",
                             .fwd_flops = 2 * w * w,
                             .bwd_input_flops = 2 * w * w,
                             .bwd_weight_flops = 2 * w * w,
                             .params = w * w + w + norm_params,
                             .out_bytes = w * e,
                             .stash_bytes = (s.norm == Norm::kNone ? 2 : 3) * w * e});
  }
  m.layers.push_back(Layer{.name = "head",
                           .kind = "head",
                           .fwd_flops = 2 * w * c,
                           .bwd_input_flops = 2 * w * c,
                           .bwd_weight_flops = 2 * w * c,
                           .params = w * c + c,
                           .out_bytes = 4,
                           .stash_bytes = (w + c) * e});
  return m;
}

std::vector<CnnConv> CnnConvs(const CnnSpec& s) {
  std::vector<CnnConv> convs{{s.in_channels, s.channels, s.image, 1}};
  // Reduction blocks spaced evenly: block i reduces when i * (r + 1) / L
  // crosses an integer (at most `reductions` of them, none at block 0).
  int done = 0, ch = s.channels, side = s.image;
  for (int i = 0; i < s.layers; ++i) {
    const bool reduce = done < s.reductions && (i + 1) * (s.reductions + 1) / (s.layers + 1) > done;
    done += reduce;
    const CnnConv conv{ch, reduce ? 2 * ch : ch, side, reduce ? 2 : 1};
    convs.push_back(conv);
    ch = conv.out_channels;
    side = conv.out_side();
  }
  return convs;
}

Model GenerateCnn(const CnnSpec& s) {
  const double e = DtypeBytes(s.dtype);
  Model m;
  m.dtype = s.dtype;
  m.input_bytes = double(s.image) * s.image * s.in_channels * e;
  const auto convs = CnnConvs(s);
  for (size_t i = 0; i < convs.size(); ++i) {
    const CnnConv& c = convs[i];
    const double c_in = c.in_channels, c_out = c.out_channels, in_hw = c.in_side, out_hw = c.out_side();
    const double flops = 2 * out_hw * out_hw * c_in * c_out * 9;
    const bool reduce = c.stride == 2;
    m.layers.push_back(Layer{.name = i == 0 ? "stem" : fmt::format("{}{}", reduce ? "reduce" : "conv", i - 1),
                             .kind = "conv",
                             .fwd_flops = flops,
                             .bwd_input_flops = flops,
                             .bwd_weight_flops = flops,
                             .params = c_in * c_out * 9 + 2 * c_out,  // weights + batchnorm scale and shift
                             .out_bytes = out_hw * out_hw * c_out * e,
                             // the conv input (weight gradient), the batchnorm input and the relu output
                             .stash_bytes = (in_hw * in_hw * c_in + out_hw * out_hw * 2 * c_out) * e});
  }
  const double hw = convs.back().out_side(), ch = convs.back().out_channels;
  m.layers.push_back(Layer{.name = "head",
                           .kind = "head",
                           .fwd_flops = hw * hw * ch + 2 * ch * s.classes,
                           .bwd_input_flops = hw * hw * ch + 2 * ch * s.classes,
                           .bwd_weight_flops = 2 * ch * s.classes,
                           .params = ch * s.classes + s.classes,
                           .out_bytes = 4,
                           .stash_bytes = (hw * hw * ch + ch + s.classes) * e});
  return m;
}

}  // namespace twinpipe::cost
