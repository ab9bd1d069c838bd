# Set-up, build, run and test. Every target creates (or reuses) the virtual environment
# at .venv with the package installed, so a fresh clone needs nothing else.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
VPY    := $(VENV)/bin/python
BUILD  := build/py
STAMP  := $(VENV)/.deps-stamp

.PHONY: all run test test-cpp test-python build system-deps clean

all: build

# Debian packages the build and the tests need (installed only when missing): the compiler
# and GoogleTest, and Mesa's lavapipe (Vulkan on the CPU) for the webgpu target.
system-deps:
	@missing=""; \
	command -v c++ >/dev/null || missing="$$missing g++"; \
	command -v cmake >/dev/null || missing="$$missing cmake"; \
	[ -f /usr/include/gtest/gtest.h ] || missing="$$missing libgtest-dev"; \
	ls /usr/share/vulkan/icd.d/lvp_icd*.json >/dev/null 2>&1 || missing="$$missing mesa-vulkan-drivers libvulkan1"; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VPY) -m pip install -q --upgrade pip
	$(VPY) -m pip install -q "scikit-build-core>=0.10" "nanobind>=2.0" ninja numpy ml_dtypes pytest \
	  nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm wgpu
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

clean:
	rm -rf build $(VENV)
