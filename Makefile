# Set-up, build, run and test. Every target creates (or reuses) the virtual environment
# at .venv with the package installed, so a fresh clone needs nothing else.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
VPY    := $(VENV)/bin/python
BUILD  := build/py
STAMP  := $(VENV)/.deps-stamp

.PHONY: all run test test-cpp test-python build system-deps clean docs

all: build

# Debian packages the build and the tests need (installed only when missing): the compiler
# and GoogleTest, Mesa's lavapipe (Vulkan on the CPU) for the webgpu target, and hipcc
# (ROCm's compiler driver) to compile the hip target's kernels for AMD architectures.
system-deps:
	@missing=""; \
	command -v c++ >/dev/null || missing="$$missing g++"; \
	command -v cmake >/dev/null || missing="$$missing cmake"; \
	[ -f /usr/include/gtest/gtest.h ] || missing="$$missing libgtest-dev"; \
	ls /usr/share/vulkan/icd.d/lvp_icd*.json >/dev/null 2>&1 || missing="$$missing mesa-vulkan-drivers libvulkan1"; \
	command -v hipcc >/dev/null || missing="$$missing hipcc"; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VPY) -m pip install -q --upgrade pip
	$(VPY) -m pip install -q "scikit-build-core>=0.10" "nanobind>=2.0" ninja numpy ml_dtypes pytest \
	  nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm wgpu
	# The optional extras the tests cover: torch (PyPI's Linux wheel, with the CUDA
	# libraries it links against: about 1.5 minutes and 5 GB), the language server,
	# layout pictures, the API reference, the autotuner's progress bar and its Ray executor.
	$(VPY) -m pip install -q "torch>=2.4" "pygls>=2.0,<3" "lsprotocol>=2025.0.0" "matplotlib>=3.7" "sphinx>=7" \
	  tqdm "ray>=2.9"
	touch $@

build: system-deps $(STAMP)
	$(VPY) -m pip install -q --no-build-isolation -e . \
	  -Cbuild-dir=$(BUILD) -Ccmake.define.TILELANG_BUILD_TESTS=ON

run: build
	$(VPY) examples/gemm.py

test-cpp: build
	ctest --test-dir $(BUILD) --output-on-failure

test-python: build
	$(VPY) -m pytest -q tests/python

test: test-cpp test-python

# The API reference from the docstrings (tests/python/test_docs.py builds it in the tests).
docs: build
	$(VPY) -m sphinx -W --keep-going -b html docs/api build/docs

clean:
	rm -rf build $(VENV)
