// RUN: kiln opt %s --pass conv-1d-as-2d --split-input-file | filecheck %s

// A strided 1-D convolution over a zero-padded sequence (Whisper's second stem convolution): the
// sequence's source gets the height of 1 and the same padding, the filter [F, C, K] -> [F, C, 1, K],
// the 2-D convolution of height 1, its result back to [N, F, W].
// CHECK-LABEL: func.func @padded_strided
// CHECK:         %[[XS:.*]] = tensor.expand_shape %arg0 {{\[\[}}0], [1, 2], [3]] output_shape [1, 64, 1, 300] : tensor<1x64x300xf32> into tensor<1x64x1x300xf32>
// CHECK:         %[[XP:.*]] = tensor.pad %[[XS]] low[0, 0, 0, 1] high[0, 0, 0, 1]
// CHECK:           tensor.yield %[[ZERO:.*]] : f32
// CHECK:         } : tensor<1x64x1x300xf32> to tensor<1x64x1x302xf32>
// CHECK:         %[[W:.*]] = tensor.expand_shape %arg1 {{\[\[}}0], [1, 2], [3]] output_shape [32, 64, 1, 3] : tensor<32x64x3xf32> into tensor<32x64x1x3xf32>
// CHECK:         %[[I:.*]] = tensor.expand_shape %arg2 {{.*}} into tensor<1x32x1x150xf32>
// CHECK:         %[[Y:.*]] = linalg.conv_2d_nchw_fchw {dilations = dense<1> : tensor<2xi64>, strides = dense<2> : tensor<2xi64>} ins(%[[XP]], %[[W]] : tensor<1x64x1x302xf32>, tensor<32x64x1x3xf32>) outs(%[[I]] : tensor<1x32x1x150xf32>)
// CHECK:         %[[R:.*]] = tensor.collapse_shape %[[Y]] {{\[\[}}0], [1, 2], [3]] : tensor<1x32x1x150xf32> into tensor<1x32x150xf32>
// CHECK:         return %[[R]]
// CHECK-NOT:     conv_1d_ncw_fcw
// CHECK-NOT:     tensor<1x64x302xf32>
module {
  func.func @padded_strided(%x: tensor<1x64x300xf32>, %w: tensor<32x64x3xf32>, %init: tensor<1x32x150xf32>) -> tensor<1x32x150xf32> {
    %zero = arith.constant 0.0 : f32
    %p = tensor.pad %x low[0, 0, 1] high[0, 0, 1] {
    ^bb0(%i: index, %j: index, %k: index):
      tensor.yield %zero : f32
    } : tensor<1x64x300xf32> to tensor<1x64x302xf32>
    %y = linalg.conv_1d_ncw_fcw {dilations = dense<1> : vector<1xi64>, strides = dense<2> : vector<1xi64>} ins(%p, %w : tensor<1x64x302xf32>, tensor<32x64x3xf32>) outs(%init : tensor<1x32x150xf32>) -> tensor<1x32x150xf32>
    return %y : tensor<1x32x150xf32>
  }
}

// -----

// Unpadded, bf16 operands into an f32 result: only reshapes around the 2-D convolution.
// CHECK-LABEL: func.func @unpadded
// CHECK:         %[[X:.*]] = tensor.expand_shape %arg0 {{.*}} into tensor<2x80x1x10xbf16>
// CHECK:         linalg.conv_2d_nchw_fchw {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>} ins(%[[X]], %{{.*}} : tensor<2x80x1x10xbf16>, tensor<16x80x1x3xbf16>) outs(%{{.*}} : tensor<2x16x1x8xf32>)
// CHECK-NOT:     tensor.pad
module {
  func.func @unpadded(%x: tensor<2x80x10xbf16>, %w: tensor<16x80x3xbf16>, %init: tensor<2x16x8xf32>) -> tensor<2x16x8xf32> {
    %y = linalg.conv_1d_ncw_fcw {dilations = dense<1> : vector<1xi64>, strides = dense<1> : vector<1xi64>} ins(%x, %w : tensor<2x80x10xbf16>, tensor<16x80x3xbf16>) outs(%init : tensor<2x16x8xf32>) -> tensor<2x16x8xf32>
    return %y : tensor<2x16x8xf32>
  }
}

// -----

// A sequence of dynamic length stays a 1-D convolution (the kernel takes static shapes only).
// CHECK-LABEL: func.func @dynamic_length
// CHECK:         linalg.conv_1d_ncw_fcw
// CHECK-NOT:     conv_2d_nchw_fchw
module {
  func.func @dynamic_length(%x: tensor<1x64x?xf32>, %w: tensor<32x64x3xf32>, %init: tensor<1x32x?xf32>) -> tensor<1x32x?xf32> {
    %y = linalg.conv_1d_ncw_fcw {dilations = dense<1> : vector<1xi64>, strides = dense<1> : vector<1xi64>} ins(%x, %w : tensor<1x64x?xf32>, tensor<32x64x3xf32>) outs(%init : tensor<1x32x?xf32>) -> tensor<1x32x?xf32>
    return %y : tensor<1x32x?xf32>
  }
}
