// RUN: python -m kiln.targets.llvm_cpu.kernels %s | filecheck %s
// RUN: python -m kiln.targets.llvm_cpu.kernels %s --report | filecheck %s --check-prefix=REPORT

// A layer norm as kiln's linalg has it, its input made by a GELU times a per-row scale, no affine
// parameters: the GELU is the layer norm's alone, so layer norm and GELU become one row program,
// whose row loop computes the GELU's body on vectors (a row read per element, the scale once per
// row) into a row buffer, then the statistics and the normalization from there.
// CHECK-LABEL: func.func private @kiln_cpu_layer_norm_0(
// CHECK-SAME:      %[[A:.*]]: tensor<2x8x32xf32>{{.*}}, %[[G:.*]]: tensor<2x8x1xf32>{{.*}}) -> tensor<2x8x32xf32>
// CHECK-DAG:     %[[A2:.*]] = tensor.collapse_shape %[[A]] {{\[\[}}0, 1], [2]] : tensor<2x8x32xf32> into tensor<16x32xf32>
// CHECK-DAG:     %[[G2:.*]] = tensor.collapse_shape %[[G]] {{\[\[}}0, 1, 2]] : tensor<2x8x1xf32> into tensor<16xf32>
// CHECK:         flow.dispatch @kiln_row_program_0::@kiln_row_program_0[%{{.*}}](%[[A2]], %[[G2]]) : (tensor<16x32xf32>, tensor<16xf32>) -> tensor<16x32xf32>
// CHECK-LABEL: stream.executable private @kiln_row_program_0
// CHECK:         memref.alloca() : memref<32xf32>
// CHECK:         scf.for %[[R:[a-z0-9_]+]] = %
// CHECK:           %[[S:.*]] = memref.load %{{.*}}[%[[R]]] : memref<16xf32>
// CHECK:           %[[SV:.*]] = vector.broadcast %[[S]] : f32 to vector<16xf32>
// CHECK:           scf.for %[[C:[a-z0-9_]+]] = %
// CHECK:             %[[V:.*]] = vector.load %{{.*}}[%[[R]], %[[C]]] : memref<16x32xf32>, vector<16xf32>
// CHECK:             %[[E:.*]] = math.erf %[[V]] : vector<16xf32>
// CHECK:             arith.mulf %{{.*}}, %[[SV]] : vector<16xf32>
// CHECK:             vector.store %{{.*}}, %{{.*}}[%[[C]]] : memref<32xf32>, vector<16xf32>
// CHECK:           vector.reduction <add>
// CHECK:           vector.fma
// CHECK:           math.rsqrt %{{.*}} : f32
// CHECK:             vector.store %{{.*}}, %{{.*}}[%[[R]], %{{.*}}] : memref<16x32xf32>, vector<16xf32>
// CHECK-NOT:   kiln_cpu_kernels
// CHECK-LABEL: func.func @layer_norm(
// CHECK:         %[[Y:.*]] = call @kiln_cpu_layer_norm_0(%arg0, %arg1)
// CHECK:         return %[[Y]]
// REPORT:      | layer norm 2x8x32 -> f32 | kiln | {{.*}} row program: the layer norm and its elementwise producer (3 ops) in one dispatch |
#id = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#row = affine_map<(d0, d1, d2) -> (d0, d1, 0)>
func.func @layer_norm(%a: tensor<2x8x32xf32>, %g: tensor<2x8x1xf32>) -> tensor<2x8x32xf32> {
  %zero = arith.constant 0.0 : f32
  %half = arith.constant 0.5 : f32
  %n = arith.constant 32.0 : f32
  %eps = arith.constant 1.0e-5 : f32
  %e3 = tensor.empty() : tensor<2x8x32xf32>
  %x = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%a, %g : tensor<2x8x32xf32>, tensor<2x8x1xf32>) outs(%e3 : tensor<2x8x32xf32>) {
  ^bb0(%v: f32, %gv: f32, %o: f32):
    %e = math.erf %v : f32
    %h = arith.mulf %e, %half : f32
    %r = arith.mulf %h, %gv : f32
    linalg.yield %r : f32
  } -> tensor<2x8x32xf32>
  %e1 = tensor.empty() : tensor<2x8x1xf32>
  %zeros = linalg.fill ins(%zero : f32) outs(%e1 : tensor<2x8x1xf32>) -> tensor<2x8x1xf32>
  %s1 = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "parallel", "reduction"]} ins(%x : tensor<2x8x32xf32>) outs(%zeros : tensor<2x8x1xf32>) {
  ^bb0(%v: f32, %o: f32):
    %r = arith.addf %v, %o : f32
    linalg.yield %r : f32
  } -> tensor<2x8x1xf32>
  %mean = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s1 : tensor<2x8x1xf32>) outs(%e1 : tensor<2x8x1xf32>) {
  ^bb0(%v: f32, %o: f32):
    %r = arith.divf %v, %n : f32
    linalg.yield %r : f32
  } -> tensor<2x8x1xf32>
  %sq = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%x, %mean : tensor<2x8x32xf32>, tensor<2x8x1xf32>) outs(%e3 : tensor<2x8x32xf32>) {
  ^bb0(%v: f32, %m: f32, %o: f32):
    %d = arith.subf %v, %m : f32
    %r = arith.mulf %d, %d : f32
    linalg.yield %r : f32
  } -> tensor<2x8x32xf32>
  %s2 = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "parallel", "reduction"]} ins(%sq : tensor<2x8x32xf32>) outs(%zeros : tensor<2x8x1xf32>) {
  ^bb0(%v: f32, %o: f32):
    %r = arith.addf %v, %o : f32
    linalg.yield %r : f32
  } -> tensor<2x8x1xf32>
  %var = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s2 : tensor<2x8x1xf32>) outs(%e1 : tensor<2x8x1xf32>) {
  ^bb0(%v: f32, %o: f32):
    %r = arith.divf %v, %n : f32
    linalg.yield %r : f32
  } -> tensor<2x8x1xf32>
  %rstd = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%var : tensor<2x8x1xf32>) outs(%e1 : tensor<2x8x1xf32>) {
  ^bb0(%v: f32, %o: f32):
    %e = arith.addf %v, %eps : f32
    %r = math.rsqrt %e : f32
    linalg.yield %r : f32
  } -> tensor<2x8x1xf32>
  %y = linalg.generic {indexing_maps = [#id, #row, #row, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%x, %mean, %rstd : tensor<2x8x32xf32>, tensor<2x8x1xf32>, tensor<2x8x1xf32>) outs(%e3 : tensor<2x8x32xf32>) {
  ^bb0(%v: f32, %m: f32, %s: f32, %o: f32):
    %d = arith.subf %v, %m : f32
    %r = arith.mulf %d, %s : f32
    linalg.yield %r : f32
  } -> tensor<2x8x32xf32>
  return %y : tensor<2x8x32xf32>
}

// -----

// A bf16 model's layer norm: x read as bf16 and widened in each generic, statistics in f32, a bf16
// weight and bias, the result rounded to bf16. The widening is the row program's producer: it reads
// x in bf16; the parameters are widened to f32 (constants: IREE folds that), and the program rounds
// its result to bf16.
// CHECK-LABEL: func.func private @kiln_cpu_layer_norm_0(
// CHECK-SAME:      %[[A:.*]]: tensor<4x32xbf16>{{.*}}, %[[W:.*]]: tensor<32xbf16>{{.*}}, %[[B:.*]]: tensor<32xbf16>{{.*}}) -> tensor<4x32xbf16>
// CHECK:         arith.extf %{{.*}} : bf16 to f32
// CHECK:         arith.extf %{{.*}} : bf16 to f32
// CHECK:         flow.dispatch @kiln_row_program_0::@kiln_row_program_0{{.*}}(%[[A]], %{{.*}}, %{{.*}}) : (tensor<4x32xbf16>, tensor<32xf32>, tensor<32xf32>) -> tensor<4x32xbf16>
// CHECK-LABEL: stream.executable private @kiln_row_program_0
// CHECK:         vector.load %{{.*}} : memref<4x32xbf16>, vector<16xbf16>
// CHECK:         arith.extf %{{.*}} : vector<16xbf16> to vector<16xf32>
// CHECK:         arith.truncf %{{.*}} : vector<16xf32> to vector<16xbf16>
// CHECK:         vector.store %{{.*}} : memref<4x32xbf16>, vector<16xbf16>
// CHECK-LABEL: func.func @bf16_affine(
// CHECK:         %[[Y:.*]] = call @kiln_cpu_layer_norm_0(%arg0, %arg1, %arg2) : (tensor<4x32xbf16>, tensor<32xbf16>, tensor<32xbf16>) -> tensor<4x32xbf16>
// CHECK:         return %[[Y]]
// REPORT:      | layer norm 4x32 + weight and bias -> bf16 | kiln | {{.*}} row program: the layer norm and its elementwise producer (1 op) in one dispatch |
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0, 0)>
#col = affine_map<(d0, d1) -> (d1)>
func.func @bf16_affine(%a: tensor<4x32xbf16>, %w: tensor<32xbf16>, %b: tensor<32xbf16>) -> tensor<4x32xbf16> {
  %zero = arith.constant 0.0 : f32
  %n = arith.constant 32.0 : f32
  %eps = arith.constant 1.0e-5 : f32
  %e2 = tensor.empty() : tensor<4x32xf32>
  %e1 = tensor.empty() : tensor<4x1xf32>
  %eb = tensor.empty() : tensor<4x32xbf16>
  %x = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%a : tensor<4x32xbf16>) outs(%e2 : tensor<4x32xf32>) {
  ^bb0(%v: bf16, %o: f32):
    %r = arith.extf %v : bf16 to f32
    linalg.yield %r : f32
  } -> tensor<4x32xf32>
  %zeros = linalg.fill ins(%zero : f32) outs(%e1 : tensor<4x1xf32>) -> tensor<4x1xf32>
  %s1 = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]} ins(%x : tensor<4x32xf32>) outs(%zeros : tensor<4x1xf32>) {
  ^bb0(%v: f32, %o: f32):
    %r = arith.addf %v, %o : f32
    linalg.yield %r : f32
  } -> tensor<4x1xf32>
  %mean = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%s1 : tensor<4x1xf32>) outs(%e1 : tensor<4x1xf32>) {
  ^bb0(%v: f32, %o: f32):
    %r = arith.divf %v, %n : f32
    linalg.yield %r : f32
  } -> tensor<4x1xf32>
  %sq = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]} ins(%a, %mean : tensor<4x32xbf16>, tensor<4x1xf32>) outs(%e2 : tensor<4x32xf32>) {
  ^bb0(%v: bf16, %m: f32, %o: f32):
    %e = arith.extf %v : bf16 to f32
    %d = arith.subf %e, %m : f32
    %r = arith.mulf %d, %d : f32
    linalg.yield %r : f32
  } -> tensor<4x32xf32>
  %s2 = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]} ins(%sq : tensor<4x32xf32>) outs(%zeros : tensor<4x1xf32>) {
  ^bb0(%v: f32, %o: f32):
    %r = arith.addf %v, %o : f32
    linalg.yield %r : f32
  } -> tensor<4x1xf32>
  %var = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%s2 : tensor<4x1xf32>) outs(%e1 : tensor<4x1xf32>) {
  ^bb0(%v: f32, %o: f32):
    %r = arith.divf %v, %n : f32
    linalg.yield %r : f32
  } -> tensor<4x1xf32>
  %rstd = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%var : tensor<4x1xf32>) outs(%e1 : tensor<4x1xf32>) {
  ^bb0(%v: f32, %o: f32):
    %e = arith.addf %v, %eps : f32
    %r = math.rsqrt %e : f32
    linalg.yield %r : f32
  } -> tensor<4x1xf32>
  %y = linalg.generic {indexing_maps = [#id, #row, #row, #col, #col, #id], iterator_types = ["parallel", "parallel"]} ins(%a, %mean, %rstd, %w, %b : tensor<4x32xbf16>, tensor<4x1xf32>, tensor<4x1xf32>, tensor<32xbf16>, tensor<32xbf16>) outs(%eb : tensor<4x32xbf16>) {
  ^bb0(%v: bf16, %m: f32, %s: f32, %wv: bf16, %bv: bf16, %o: bf16):
    %e = arith.extf %v : bf16 to f32
    %d = arith.subf %e, %m : f32
    %n1 = arith.mulf %d, %s : f32
    %we = arith.extf %wv : bf16 to f32
    %n2 = arith.mulf %n1, %we : f32
    %be = arith.extf %bv : bf16 to f32
    %n3 = arith.addf %n2, %be : f32
    %r = arith.truncf %n3 : f32 to bf16
    linalg.yield %r : bf16
  } -> tensor<4x32xbf16>
  return %y : tensor<4x32xbf16>
}

// -----

// A residual add into the layer norm whose sum is a result too (the residual stream goes on), as
// kiln's fusion leaves it: the sum is made once, for the mean and the result, and added again at the
// start of the squares' and the normalization's generics. The C layer norm takes the sum (a row
// program would add again); the normalization's generic goes, the sum's stays. The layer norm's
// flags say its bias alone (2).
// CHECK-LABEL: stream.executable private @kiln_cpu_kernels
// CHECK:         stream.executable.export public @layer_norm_f32
// CHECK-LABEL: func.func private @kiln_cpu_layer_norm_0(
// CHECK:         %[[FLAGS:.*]] = arith.constant 2 : index
// CHECK:         flow.dispatch @kiln_cpu_kernels::@layer_norm_f32{{.*}}(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[FLAGS]], {{.*}} : (tensor<4x32xf32>, tensor<1xf32>, tensor<32xf32>, index, index, index, index, index, index, index) -> tensor<4x32xf32>
// CHECK-LABEL: func.func @residual(
// CHECK:         %[[X:.*]] = linalg.generic {{.*}} ins(%arg0, %arg1 :
// CHECK:         %[[Y:.*]] = call @kiln_cpu_layer_norm_0(%[[X]], %arg2) : (tensor<4x32xf32>, tensor<32xf32>) -> tensor<4x32xf32>
// CHECK-NOT:     math.rsqrt
// CHECK:         return %[[Y]], %[[X]]
// REPORT:      | layer norm 4x32 + bias -> f32 | kiln | {{.*}} row layer norm of kiln_rows.c |
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0, 0)>
#col = affine_map<(d0, d1) -> (d1)>
func.func @residual(%a: tensor<4x32xf32>, %res: tensor<4x32xf32>, %b: tensor<32xf32>) -> (tensor<4x32xf32>, tensor<4x32xf32>) {
  %zero = arith.constant 0.0 : f32
  %n = arith.constant 32.0 : f32
  %eps = arith.constant 1.0e-5 : f32
  %e2 = tensor.empty() : tensor<4x32xf32>
  %e1 = tensor.empty() : tensor<4x1xf32>
  %x = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]} ins(%a, %res : tensor<4x32xf32>, tensor<4x32xf32>) outs(%e2 : tensor<4x32xf32>) {
  ^bb0(%v: f32, %r: f32, %o: f32):
    %s = arith.addf %v, %r : f32
    linalg.yield %s : f32
  } -> tensor<4x32xf32>
  %zeros = linalg.fill ins(%zero : f32) outs(%e1 : tensor<4x1xf32>) -> tensor<4x1xf32>
  %s1 = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]} ins(%x : tensor<4x32xf32>) outs(%zeros : tensor<4x1xf32>) {
  ^bb0(%v: f32, %o: f32):
    %r = arith.addf %v, %o : f32
    linalg.yield %r : f32
  } -> tensor<4x1xf32>
  %mean = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%s1 : tensor<4x1xf32>) outs(%e1 : tensor<4x1xf32>) {
  ^bb0(%v: f32, %o: f32):
    %r = arith.divf %v, %n : f32
    linalg.yield %r : f32
  } -> tensor<4x1xf32>
  %sq = linalg.generic {indexing_maps = [#id, #id, #row, #id], iterator_types = ["parallel", "parallel"]} ins(%a, %res, %mean : tensor<4x32xf32>, tensor<4x32xf32>, tensor<4x1xf32>) outs(%e2 : tensor<4x32xf32>) {
  ^bb0(%v: f32, %r: f32, %m: f32, %o: f32):
    %s = arith.addf %v, %r : f32
    %d = arith.subf %s, %m : f32
    %q = arith.mulf %d, %d : f32
    linalg.yield %q : f32
  } -> tensor<4x32xf32>
  %s2 = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]} ins(%sq : tensor<4x32xf32>) outs(%zeros : tensor<4x1xf32>) {
  ^bb0(%v: f32, %o: f32):
    %r = arith.addf %v, %o : f32
    linalg.yield %r : f32
  } -> tensor<4x1xf32>
  %var = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%s2 : tensor<4x1xf32>) outs(%e1 : tensor<4x1xf32>) {
  ^bb0(%v: f32, %o: f32):
    %r = arith.divf %v, %n : f32
    linalg.yield %r : f32
  } -> tensor<4x1xf32>
  %rstd = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%var : tensor<4x1xf32>) outs(%e1 : tensor<4x1xf32>) {
  ^bb0(%v: f32, %o: f32):
    %e = arith.addf %v, %eps : f32
    %r = math.rsqrt %e : f32
    linalg.yield %r : f32
  } -> tensor<4x1xf32>
  %y = linalg.generic {indexing_maps = [#id, #id, #row, #row, #col, #id], iterator_types = ["parallel", "parallel"]} ins(%a, %res, %mean, %rstd, %b : tensor<4x32xf32>, tensor<4x32xf32>, tensor<4x1xf32>, tensor<4x1xf32>, tensor<32xf32>) outs(%e2 : tensor<4x32xf32>) {
  ^bb0(%v: f32, %r: f32, %m: f32, %s: f32, %bv: f32, %o: f32):
    %x2 = arith.addf %v, %r : f32
    %d = arith.subf %x2, %m : f32
    %n1 = arith.mulf %d, %s : f32
    %n2 = arith.addf %n1, %bv : f32
    linalg.yield %n2 : f32
  } -> tensor<4x32xf32>
  return %y, %x : tensor<4x32xf32>, tensor<4x32xf32>
}

// -----

// The statistics are results too (training's native_layer_norm): the mean and rstd come from one
// dispatch of the row moments; the normalization stays IREE's.
// CHECK-LABEL: func.func private @kiln_cpu_moments_0(
// CHECK-SAME:      %{{.*}}: tensor<4x32xf32>{{.*}}) -> (tensor<4x1xf32>, tensor<4x1xf32>)
// CHECK:         flow.dispatch @kiln_cpu_kernels::@moments_f32{{.*}} : (tensor<4x32xf32>, index, index, index, index) -> (tensor<4xf32>, tensor<4xf32>)
// CHECK-LABEL: func.func @statistics_returned(
// CHECK:         %[[M:.*]]:2 = call @kiln_cpu_moments_0(%{{.*}})
// CHECK-NOT:     math.rsqrt
// CHECK:         %[[Y:.*]] = linalg.generic {{.*}} ins(%{{.*}}, %[[M]]#0, %[[M]]#1 :
// CHECK:         return %[[Y]], %[[M]]#0, %[[M]]#1
// REPORT:      | layer norm moments 4x32 | kiln | {{.*}} row moments of kiln_rows.c |
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0, 0)>
func.func @statistics_returned(%x: tensor<4x32xf32>) -> (tensor<4x32xf32>, tensor<4x1xf32>, tensor<4x1xf32>) {
  %zero = arith.constant 0.0 : f32
  %n = arith.constant 32.0 : f32
  %eps = arith.constant 1.0e-5 : f32
  %e2 = tensor.empty() : tensor<4x32xf32>
  %e1 = tensor.empty() : tensor<4x1xf32>
  %zeros = linalg.fill ins(%zero : f32) outs(%e1 : tensor<4x1xf32>) -> tensor<4x1xf32>
  %s1 = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]} ins(%x : tensor<4x32xf32>) outs(%zeros : tensor<4x1xf32>) {
  ^bb0(%v: f32, %o: f32):
    %r = arith.addf %v, %o : f32
    linalg.yield %r : f32
  } -> tensor<4x1xf32>
  %mean = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%s1 : tensor<4x1xf32>) outs(%e1 : tensor<4x1xf32>) {
  ^bb0(%v: f32, %o: f32):
    %r = arith.divf %v, %n : f32
    linalg.yield %r : f32
  } -> tensor<4x1xf32>
  %sq = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]} ins(%x, %mean : tensor<4x32xf32>, tensor<4x1xf32>) outs(%e2 : tensor<4x32xf32>) {
  ^bb0(%v: f32, %m: f32, %o: f32):
    %d = arith.subf %v, %m : f32
    %r = arith.mulf %d, %d : f32
    linalg.yield %r : f32
  } -> tensor<4x32xf32>
  %s2 = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]} ins(%sq : tensor<4x32xf32>) outs(%zeros : tensor<4x1xf32>) {
  ^bb0(%v: f32, %o: f32):
    %r = arith.addf %v, %o : f32
    linalg.yield %r : f32
  } -> tensor<4x1xf32>
  %var = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%s2 : tensor<4x1xf32>) outs(%e1 : tensor<4x1xf32>) {
  ^bb0(%v: f32, %o: f32):
    %r = arith.divf %v, %n : f32
    linalg.yield %r : f32
  } -> tensor<4x1xf32>
  %rstd = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%var : tensor<4x1xf32>) outs(%e1 : tensor<4x1xf32>) {
  ^bb0(%v: f32, %o: f32):
    %e = arith.addf %v, %eps : f32
    %r = math.rsqrt %e : f32
    linalg.yield %r : f32
  } -> tensor<4x1xf32>
  %y = linalg.generic {indexing_maps = [#id, #row, #row, #id], iterator_types = ["parallel", "parallel"]} ins(%x, %mean, %rstd : tensor<4x32xf32>, tensor<4x1xf32>, tensor<4x1xf32>) outs(%e2 : tensor<4x32xf32>) {
  ^bb0(%v: f32, %m: f32, %s: f32, %o: f32):
    %d = arith.subf %v, %m : f32
    %r = arith.mulf %d, %s : f32
    linalg.yield %r : f32
  } -> tensor<4x32xf32>
  return %y, %mean, %rstd : tensor<4x32xf32>, tensor<4x1xf32>, tensor<4x1xf32>
}

// -----

// Must not fire: both averages divide by 31, not by the row's 32 values (the kernel divides by the row length).
// CHECK-LABEL: func.func @another_count(
// CHECK-NOT:     kiln_cpu_moments
// CHECK:         math.rsqrt
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0, 0)>
#one = affine_map<(d0, d1) -> (d0, d1)>
func.func @another_count(%x: tensor<4x32xf32>) -> tensor<4x1xf32> {
  %zero = arith.constant 0.0 : f32
  %n1 = arith.constant 31.0 : f32
  %eps = arith.constant 1.0e-5 : f32
  %e1 = tensor.empty() : tensor<4x1xf32>
  %e2 = tensor.empty() : tensor<4x32xf32>
  %zeros = linalg.fill ins(%zero : f32) outs(%e1 : tensor<4x1xf32>) -> tensor<4x1xf32>
  %s1 = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]} ins(%x : tensor<4x32xf32>) outs(%zeros : tensor<4x1xf32>) {
  ^bb0(%v: f32, %o: f32):
    %r = arith.addf %v, %o : f32
    linalg.yield %r : f32
  } -> tensor<4x1xf32>
  %mean = linalg.generic {indexing_maps = [#one, #one], iterator_types = ["parallel", "parallel"]} ins(%s1 : tensor<4x1xf32>) outs(%e1 : tensor<4x1xf32>) {
  ^bb0(%v: f32, %o: f32):
    %r = arith.divf %v, %n1 : f32
    linalg.yield %r : f32
  } -> tensor<4x1xf32>
  %sq = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]} ins(%x, %mean : tensor<4x32xf32>, tensor<4x1xf32>) outs(%e2 : tensor<4x32xf32>) {
  ^bb0(%v: f32, %m: f32, %o: f32):
    %d = arith.subf %v, %m : f32
    %r = arith.mulf %d, %d : f32
    linalg.yield %r : f32
  } -> tensor<4x32xf32>
  %s2 = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]} ins(%sq : tensor<4x32xf32>) outs(%zeros : tensor<4x1xf32>) {
  ^bb0(%v: f32, %o: f32):
    %r = arith.addf %v, %o : f32
    linalg.yield %r : f32
  } -> tensor<4x1xf32>
  %var = linalg.generic {indexing_maps = [#one, #one], iterator_types = ["parallel", "parallel"]} ins(%s2 : tensor<4x1xf32>) outs(%e1 : tensor<4x1xf32>) {
  ^bb0(%v: f32, %o: f32):
    %r = arith.divf %v, %n1 : f32
    linalg.yield %r : f32
  } -> tensor<4x1xf32>
  %rstd = linalg.generic {indexing_maps = [#one, #one], iterator_types = ["parallel", "parallel"]} ins(%var : tensor<4x1xf32>) outs(%e1 : tensor<4x1xf32>) {
  ^bb0(%v: f32, %o: f32):
    %e = arith.addf %v, %eps : f32
    %r = math.rsqrt %e : f32
    linalg.yield %r : f32
  } -> tensor<4x1xf32>
  return %rstd : tensor<4x1xf32>
}
