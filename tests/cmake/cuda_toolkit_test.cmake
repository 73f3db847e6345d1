# cmake -P tests/cmake/cuda_toolkit_test.cmake: cmake/cuda_toolkit.cmake reads libtorch's CUDA version from a pip
# install's torch/version.py and a libtorch zip's build-version (sample texts, then sample trees found through
# Torch_DIR / CMAKE_PREFIX_PATH as configure finds them), and refuses a CUDA compiler of another version naming both.
cmake_minimum_required(VERSION 3.24)
include(${CMAKE_CURRENT_LIST_DIR}/../../cmake/cuda_toolkit.cmake)
include(${CMAKE_CURRENT_LIST_DIR}/expect.cmake)

# version.py as PyTorch writes it: older releases "cuda = '12.4'", newer ones with a type annotation.
fwlab_torch_cuda_from_version_py(v "__version__ = '2.4.0+cu124'\ndebug = False\ncuda = '12.4'\ngit_version = 'd99'\n")
fwlab_expect_eq("version.py cuda = '12.4'" "${v}" "12.4")
fwlab_torch_cuda_from_version_py(v [[
from typing import Optional

__all__ = ['__version__', 'debug', 'cuda', 'git_version', 'hip']
__version__ = '2.6.0+cu118'
debug = False
cuda: Optional[str] = '11.8'
git_version = '1eba9b3aa3c43f86f4a2c807ac8e12c4a7767340'
hip: Optional[str] = None
]])
fwlab_expect_eq("version.py annotated" "${v}" "11.8")
fwlab_torch_cuda_from_version_py(v "__version__ = '2.5.1+cpu'\ndebug = False\ncuda: Optional[str] = None\n")
fwlab_expect_eq("version.py CPU build" "${v}" "")
fwlab_torch_cuda_from_version_py(v "__version__ = '2.5.1'\ncuda_home = '12.1'\n")
fwlab_expect_eq("version.py: another key" "${v}" "")

# build-version of a libtorch zip.
fwlab_torch_cuda_from_build_version(v "2.4.0+cu124\n")
fwlab_expect_eq("build-version cu124" "${v}" "12.4")
fwlab_torch_cuda_from_build_version(v "2.7.1+cu118")
fwlab_expect_eq("build-version cu118" "${v}" "11.8")
fwlab_torch_cuda_from_build_version(v "2.9.0+cu130")
fwlab_expect_eq("build-version cu130" "${v}" "13.0")
fwlab_torch_cuda_from_build_version(v "2.4.0+cpu")
fwlab_expect_eq("build-version cpu" "${v}" "")
fwlab_torch_cuda_from_build_version(v "2.4.0+rocm6.1")
fwlab_expect_eq("build-version rocm" "${v}" "")

# The same through installed trees, as configure finds them before find_package(Torch).
set(root "${CMAKE_CURRENT_BINARY_DIR}/cuda_toolkit_test_trees")
file(REMOVE_RECURSE "${root}")
set(pip "${root}/venv/lib/python3.11/site-packages/torch")
file(WRITE "${pip}/share/cmake/Torch/TorchConfig.cmake" "")
file(WRITE "${pip}/version.py" "__version__ = '2.4.0+cu124'\ncuda = '12.4'\n")
set(zip "${root}/libtorch")
file(WRITE "${zip}/share/cmake/Torch/TorchConfig.cmake" "")
file(WRITE "${zip}/build-version" "2.3.1+cu121\n")
set(cpu "${root}/debian/lib/x86_64-linux-gnu/cmake/Torch")
file(WRITE "${cpu}/TorchConfig.cmake" "")

set(CMAKE_PREFIX_PATH "${pip}/share/cmake")  # torch.utils.cmake_prefix_path
fwlab_torch_cuda_version(v)
fwlab_expect_eq("pip install via CMAKE_PREFIX_PATH" "${v}" "12.4")
fwlab_expect_eq("pip install: the file read" "${v_FROM}" "${pip}/version.py")
set(CMAKE_PREFIX_PATH "")
set(Torch_DIR "${zip}/share/cmake/Torch")
fwlab_torch_cuda_version(v)
fwlab_expect_eq("libtorch zip via Torch_DIR" "${v}" "12.1")
set(Torch_DIR "")
set(CMAKE_PREFIX_PATH "/nonexistent;${zip}")
fwlab_torch_cuda_version(v)
fwlab_expect_eq("libtorch zip via its prefix" "${v}" "12.1")
set(CMAKE_PREFIX_PATH "")
set(Torch_DIR "${cpu}")
fwlab_torch_cuda_version(v)
fwlab_expect_eq("Debian-like CPU libtorch: unknown" "${v}" "")
set(Torch_DIR "")
fwlab_torch_cuda_version(v)
fwlab_expect_eq("no libtorch given: unknown" "${v}" "")

# The preferred nvcc: <root>/cuda-X.Y/bin/nvcc where it exists.
file(WRITE "${root}/local/cuda-12.4/bin/nvcc" "")
fwlab_nvcc_for_cuda_version(n "12.4" "${root}/local")
fwlab_expect_eq("nvcc of CUDA 12.4" "${n}" "${root}/local/cuda-12.4/bin/nvcc")
fwlab_nvcc_for_cuda_version(n "12.1" "${root}/local")
fwlab_expect_eq("no CUDA 12.1 installed" "${n}" "")
fwlab_nvcc_for_cuda_version(n "" "${root}/local")
fwlab_expect_eq("torch without CUDA" "${n}" "")

# The comparison: major.minor only; a mismatch names both versions and the way to the right nvcc.
fwlab_cuda_version_mismatch(e "12.4" "libtorch" "12.4.131" "the CUDA compiler /usr/local/cuda-12.4/bin/nvcc")
fwlab_expect_eq("12.4 vs 12.4.131" "${e}" "")
fwlab_cuda_version_mismatch(e "13.0" "libtorch" "13.0.88" "the CUDA compiler /usr/local/cuda/bin/nvcc")
fwlab_expect_eq("13.0 vs 13.0.88" "${e}" "")
fwlab_cuda_version_mismatch(e "12.4" "libtorch (/x/torch/version.py)" "13.0.88"
                            "the CUDA compiler /usr/local/cuda/bin/nvcc")
fwlab_expect_match("mismatch names torch's version" "${e}" "libtorch \\(/x/torch/version.py\\) is CUDA 12\\.4")
fwlab_expect_match("mismatch names nvcc's version" "${e}" "/usr/local/cuda/bin/nvcc is CUDA 13\\.0\\.88")
fwlab_expect_match("mismatch: CUDACXX" "${e}" "CUDACXX=/usr/local/cuda-12\\.4/bin/nvcc")
fwlab_expect_match("mismatch: CMAKE_CUDA_COMPILER" "${e}" "-DCMAKE_CUDA_COMPILER=/usr/local/cuda-12\\.4/bin/nvcc")
fwlab_cuda_version_mismatch(e "12.4" "libtorch" "12.6.20" "nvcc")
fwlab_expect_match("minor versions differ" "${e}" "is CUDA 12\\.4, but nvcc is CUDA 12\\.6\\.20")
fwlab_cuda_version_mismatch(e "" "libtorch" "13.0.88" "nvcc")
fwlab_expect_eq("CPU libtorch: no comparison" "${e}" "")
file(REMOVE_RECURSE "${root}")
fwlab_expect_done()
