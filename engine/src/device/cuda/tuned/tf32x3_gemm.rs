//! A linear layer's product on the tensor cores at float32 accuracy (`kernels/tf32x3_gemm.cu`):
//! each operand split into two TF32 parts and three TF32 products summed, the analogue of the GEMM
//! templates Inductor's max-autotune times against cuBLAS. Its tile shapes are max-autotune's
//! candidates ([`Tile::ALL`]); the kernel says why three products keep float32's accuracy.

use std::sync::Arc;

use cudarc::driver::LaunchConfig;

use super::linear_gemm::{LinearGemm, LinearShape};
use crate::device::cuda::context::CudaDevice;
use crate::device::cuda::error::CudaError;
pub(crate) use crate::device::cuda::source::TF32X3_GEMM as FAMILY;

/// A tile shape the kernel is compiled for: the block's `rows x cols` of the output, the `k` it
/// copies at a time, its warps and its pipeline depth (`TF32X3_GEMMS` in the kernel).
/// Stored by name (see [`Tile::name`]), so that a stored tile is always one of [`Tile::ALL`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(into = "String", try_from = "String")]
pub(crate) struct Tile {
    rows: u32,
    cols: u32,
    k: u32,
    warps: u32,
    stages: u32,
}

impl Tile {
    /// Every compiled tile. Measured on the H100 over the MLP's and the transformer blocks'
    /// products: the smallest tiles won most often (more blocks per SM hide the tensor cores'
    /// latency better), the larger ones on a few long products.
    pub(crate) const ALL: [Tile; 4] = [
        Tile { rows: 64, cols: 64, k: 32, warps: 4, stages: 3 },
        Tile { rows: 64, cols: 64, k: 16, warps: 4, stages: 4 },
        Tile { rows: 128, cols: 64, k: 16, warps: 8, stages: 4 },
        Tile { rows: 64, cols: 128, k: 16, warps: 8, stages: 4 },
    ];

    /// How logs, output code and the autotune cache name the tile: `64x64x32`.
    pub(crate) fn name(&self) -> String {
        format!("{}x{}x{}", self.rows, self.cols, self.k)
    }

    /// The tile named `name` (see [`Tile::name`]).
    pub(crate) fn named(name: &str) -> Option<Tile> {
        Tile::ALL.into_iter().find(|t| t.name() == name)
    }

    /// Shared memory a block uses: `stages` copies of both operands' tiles, each row `k` floats
    /// padded to 16 more than a multiple of 32 (`Tile::LD` in the kernel).
    fn shared_bytes(&self) -> u32 {
        let row = if self.k % 32 == 16 { self.k } else { self.k + 16 };
        self.stages * (self.rows + self.cols) * row * 4
    }
}

impl From<Tile> for String {
    fn from(tile: Tile) -> String {
        tile.name()
    }
}

impl TryFrom<String> for Tile {
    type Error = String;

    fn try_from(name: String) -> Result<Tile, String> {
        Tile::named(&name).ok_or_else(|| format!("no tf32x3_gemm tile is named `{name}`"))
    }
}

/// Whether `device` has the tensor-core instruction the kernel uses (TF32 `mma.sync` needs
/// compute capability 8.0, Ampere, or later).
pub(crate) fn supported(device: &CudaDevice) -> bool {
    device.facts().compute_capability.0 >= 8
}

/// Whether the grid for `shape` fits a launch: one block row per `tile.rows` rows, at most 65535.
pub(crate) fn fits(shape: &LinearShape, tile: Tile) -> bool {
    shape.rows.div_ceil(tile.rows as usize) <= 65535
}

/// Loads the kernels of `tile` for `shape` on `device` (compiled once per device, then cached).
pub(crate) fn load(device: &Arc<CudaDevice>, shape: LinearShape, tile: Tile) -> Result<LinearGemm, CudaError> {
    if !supported(device) {
        return Err(CudaError::new("tf32x3_gemm needs TF32 tensor cores (compute capability 8.0 or later)"));
    }
    if !fits(&shape, tile) {
        return Err(CudaError::new(format!("tf32x3_gemm {}: too many rows ({})", tile.name(), shape.rows)));
    }
    let config = LaunchConfig {
        grid_dim: (shape.n.div_ceil(tile.cols as usize) as u32, shape.rows.div_ceil(tile.rows as usize) as u32, 1),
        block_dim: (tile.warps * 32, 1, 1),
        shared_mem_bytes: tile.shared_bytes(),
    };
    LinearGemm::load(device, FAMILY, &format!("tf32x3_gemm_{}", tile.name()), shape, config)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiles_are_named_and_found_by_name() {
        for tile in Tile::ALL {
            assert_eq!(Tile::named(&tile.name()), Some(tile));
        }
        assert_eq!(Tile::named("64x64x8"), None);
    }

    #[test]
    fn shared_memory_matches_the_kernels_padding() {
        // 3 stages of (64 + 64) rows of 32 floats padded to 48.
        assert_eq!(Tile::ALL[0].shared_bytes(), 3 * 128 * 48 * 4);
        // 4 stages of rows of 16 floats, which need no padding.
        assert_eq!(Tile::ALL[2].shared_bytes(), 4 * 192 * 16 * 4);
    }
}
