"""Build the optional native BM25F scorer and tokenizer; clawkb falls back to
numpy / pure Python without them."""

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


class OptionalBuildExt(build_ext):
    """Never fail the install because a C compiler is missing."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:  # pragma: no cover - depends on the machine
            print(f"clawkb: native scorer not built ({exc}); using the numpy scorer")

    def build_extension(self, ext: Extension) -> None:
        try:
            super().build_extension(ext)
        except Exception as exc:  # pragma: no cover
            print(f"clawkb: native scorer not built ({exc}); using the numpy scorer")


setup(
    ext_modules=[
        Extension(
            "clawkb.index._bm25native",
            sources=["src/clawkb/index/_bm25native.c"],
            depends=["src/clawkb/index/_topk.h"],
            extra_compile_args=["-O3", "-Wall", "-Wextra"],
        ),
        Extension(
            "clawkb.index._blockmax",
            sources=["src/clawkb/index/_blockmax.c"],
            depends=[
                "src/clawkb/index/_topk.h",
                "src/clawkb/index/_packed.h",
                "src/clawkb/index/_dict.h",
                "src/clawkb/index/_bounds.h",
                "src/clawkb/index/_unpack.h",
            ],
            extra_compile_args=["-O3", "-Wall", "-Wextra"],
        ),
        Extension(
            "clawkb.index._postings",
            sources=["src/clawkb/index/_postings.c"],
            depends=[
                "src/clawkb/index/_packed.h",
                "src/clawkb/index/_dict.h",
                "src/clawkb/index/_bounds.h",
            ],
            extra_compile_args=["-O3", "-Wall", "-Wextra"],
        ),
        Extension(
            "clawkb.text._chunknative",
            sources=["src/clawkb/text/_chunknative.c"],
            extra_compile_args=["-O3", "-Wall", "-Wextra"],
        ),
        Extension(
            "clawkb.text._toknative",
            sources=["src/clawkb/text/_toknative.c"],
            extra_compile_args=["-O3", "-Wall", "-Wextra"],
        ),
    ],
    cmdclass={"build_ext": OptionalBuildExt},
)
