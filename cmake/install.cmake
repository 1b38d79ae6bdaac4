# cmake --install: the lowbit command, both libraries with their headers, what the command ships
# with (policies and golden cases, in share/lowbit where the installed lowbit looks for them:
# tools/lowbit/shipped_data.hpp) and a CMake package: find_package(lowbit CONFIG) gives
# lowbit::reference (the arithmetic), lowbit::engine (the conformance engine) and lowbit::plugin_abi
# (the kernel plugin ABI header, include/lowbit/kernel_plugin.h).
include(CMakePackageConfigHelpers)

set(LOWBIT_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/lowbit)
set(LOWBIT_INSTALL_DATADIR ${CMAKE_INSTALL_DATADIR}/lowbit)

install(TARGETS lowbit RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS lowbit_reference lowbit_engine lowbit_plugin_abi EXPORT lowbitTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  FILE_SET HEADERS DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY policies/ DESTINATION ${LOWBIT_INSTALL_DATADIR}/policies)
install(DIRECTORY golden/ DESTINATION ${LOWBIT_INSTALL_DATADIR}/golden)

install(EXPORT lowbitTargets NAMESPACE lowbit:: DESTINATION ${LOWBIT_INSTALL_CMAKEDIR})
set(LOWBIT_INSTALL_POLICYDIR ${LOWBIT_INSTALL_DATADIR}/policies)
set(LOWBIT_INSTALL_GOLDENDIR ${LOWBIT_INSTALL_DATADIR}/golden)
configure_package_config_file(cmake/lowbitConfig.cmake.in ${CMAKE_CURRENT_BINARY_DIR}/lowbitConfig.cmake
  INSTALL_DESTINATION ${LOWBIT_INSTALL_CMAKEDIR}
  PATH_VARS LOWBIT_INSTALL_POLICYDIR LOWBIT_INSTALL_GOLDENDIR)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/lowbitConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)  # 0.x: a new minor version may change the API
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/lowbitConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/lowbitConfigVersion.cmake
  DESTINATION ${LOWBIT_INSTALL_CMAKEDIR})
