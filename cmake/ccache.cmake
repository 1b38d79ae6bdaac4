# The compiler cache (ccache, a Debian package): every preset and the Python package's build compile
# through it when it is installed, so that a fresh clone in another folder, or the second of two builds
# of the same sources, reuses the objects instead of compiling them again (scripts/test-all.sh's warm
# figures: docs/testing.md). It changes no flag and no object: a miss compiles exactly as without it.
#  - base_dir = the repository root: absolute paths under it are rewritten relative to the build folder,
#    so two clones at different paths hash the same (every build folder is two levels below the root:
#    build/<preset>, build/python-<tag>);
#  - hash_dir off: -g builds (sanitize, fuzz) do not hash the build folder's absolute path.
# Off with -DLOWBIT_CCACHE=OFF (or CCACHE_DISABLE=1); the cache itself is ccache's own (~/.cache/ccache).
option(LOWBIT_CCACHE "Compile through ccache when it is installed" ON)
if(LOWBIT_CCACHE AND NOT CMAKE_CXX_COMPILER_LAUNCHER)
  find_program(LOWBIT_CCACHE_PROGRAM ccache)
  if(LOWBIT_CCACHE_PROGRAM)
    get_filename_component(_lowbit_root "${CMAKE_CURRENT_LIST_DIR}/.." ABSOLUTE)
    set(_lowbit_launcher ${CMAKE_COMMAND} -E env CCACHE_BASEDIR=${_lowbit_root} CCACHE_NOHASHDIR=1
                         ${LOWBIT_CCACHE_PROGRAM})
    set(CMAKE_CXX_COMPILER_LAUNCHER ${_lowbit_launcher})
    set(CMAKE_CUDA_COMPILER_LAUNCHER ${_lowbit_launcher})
  endif()
endif()
