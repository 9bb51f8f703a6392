// RUN: kiln opt %s --pass depthwise-to-nhwc --split-input-file | filecheck %s

// A zero-padded NCHW depthwise convolution on llvm-cpu: the padding is rebuilt on the transposed
// (NHWC) source, the filter [C, R, S] becomes [R, S, C], and the NHWC result is transposed back.
// CHECK-LABEL: func.func @padded
// CHECK:         %[[X:.*]] = linalg.transpose ins(%arg0 : tensor<2x8x6x6xf32>) outs({{.*}} : tensor<2x6x6x8xf32>) permutation = [0, 2, 3, 1]
// CHECK:         %[[P:.*]] = tensor.pad %[[X]] low[0, 1, 1, 0] high[0, 1, 1, 0]
// CHECK:         %[[W:.*]] = linalg.transpose ins(%arg1 : tensor<8x3x3xf32>) outs({{.*}} : tensor<3x3x8xf32>) permutation = [1, 2, 0]
// CHECK:         %[[Y:.*]] = linalg.depthwise_conv_2d_nhwc_hwc {dilations = dense<1> : tensor<2xi64>, strides = dense<2> : tensor<2xi64>} ins(%[[P]], %[[W]] : tensor<2x8x8x8xf32>, tensor<3x3x8xf32>) outs({{.*}} : tensor<2x3x3x8xf32>)
// CHECK:         %[[R:.*]] = linalg.transpose ins(%[[Y]] : tensor<2x3x3x8xf32>) outs({{.*}} : tensor<2x8x3x3xf32>) permutation = [0, 3, 1, 2]
// CHECK:         return %[[R]]
// CHECK-NOT:     depthwise_conv_2d_nchw_chw
module {
  func.func @padded(%x: tensor<2x8x6x6xf32>, %w: tensor<8x3x3xf32>) -> tensor<2x8x3x3xf32> {
    %zero = arith.constant 0.0 : f32
    %padded = tensor.pad %x low[0, 0, 1, 1] high[0, 0, 1, 1] {
    ^bb0(%i0: index, %i1: index, %i2: index, %i3: index):
      tensor.yield %zero : f32
    } : tensor<2x8x6x6xf32> to tensor<2x8x8x8xf32>
    %e = tensor.empty() : tensor<2x8x3x3xf32>
    %init = linalg.fill ins(%zero : f32) outs(%e : tensor<2x8x3x3xf32>) -> tensor<2x8x3x3xf32>
    %y = linalg.depthwise_conv_2d_nchw_chw {dilations = dense<1> : vector<2xi64>, strides = dense<2> : vector<2xi64>} ins(%padded, %w : tensor<2x8x8x8xf32>, tensor<8x3x3xf32>) outs(%init : tensor<2x8x3x3xf32>) -> tensor<2x8x3x3xf32>
    return %y : tensor<2x8x3x3xf32>
  }
}

// -----

// Unpadded bf16 input, f32 accumulator (kiln's bf16 lowering): the input itself is transposed.
// CHECK-LABEL: func.func @unpadded
// CHECK:         linalg.transpose ins(%arg0 : tensor<1x4x5x5xbf16>) {{.*}} permutation = [0, 2, 3, 1]
// CHECK:         linalg.depthwise_conv_2d_nhwc_hwc {{.*}} ins({{.*}} : tensor<1x5x5x4xbf16>, tensor<3x3x4xbf16>) outs({{.*}} : tensor<1x3x3x4xf32>)
module {
  func.func @unpadded(%x: tensor<1x4x5x5xbf16>, %w: tensor<4x3x3xbf16>, %init: tensor<1x4x3x3xf32>) -> tensor<1x4x3x3xf32> {
    %y = linalg.depthwise_conv_2d_nchw_chw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%x, %w : tensor<1x4x5x5xbf16>, tensor<4x3x3xbf16>) outs(%init : tensor<1x4x3x3xf32>) -> tensor<1x4x3x3xf32>
    return %y : tensor<1x4x3x3xf32>
  }
}
