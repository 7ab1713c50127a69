# libmminfer: the engine, preprocessing and pipelines as one library, shared and static, with
# only include/mminfer as its interface. Built from the objects of the internal libraries the
# command line and the tests link, so every part is compiled once.
set(MMINFER_LIBRARY_PARTS mminfer_engine mminfer_image mminfer_text mminfer_audio mminfer_generate mminfer_pipelines)
set(MMINFER_LIBRARY_OBJECTS)
foreach(part ${MMINFER_LIBRARY_PARTS})
  list(APPEND MMINFER_LIBRARY_OBJECTS $<TARGET_OBJECTS:${part}>)
endforeach()

add_library(mminfer_shared SHARED ${MMINFER_LIBRARY_OBJECTS})
# Linking the parts again resolves nothing twice (their objects are all here already) but brings
# their dependencies (oneDNN, ONNX, protobuf, codecs...) onto the link line, privately.
target_link_libraries(mminfer_shared PRIVATE ${MMINFER_LIBRARY_PARTS})
set_target_properties(mminfer_shared PROPERTIES OUTPUT_NAME mminfer VERSION ${PROJECT_VERSION} SOVERSION ${PROJECT_VERSION_MAJOR}
                      EXPORT_NAME mminfer)
target_include_directories(mminfer_shared INTERFACE $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
                                             $<INSTALL_INTERFACE:include>)
target_compile_features(mminfer_shared INTERFACE cxx_std_20)
add_library(mminfer::mminfer ALIAS mminfer_shared)  # the name users of the package see

# A static archive carries no dependencies of its own: its users link these (Debian's names).
set(MMINFER_STATIC_DEPENDENCIES onnx onnx_proto protobuf dnnl gomp jpeg png16 webp webpdemux gif pcre2-8 utf8proc
    sndfile samplerate pthread)
add_library(mminfer_static STATIC ${MMINFER_LIBRARY_OBJECTS})
set_target_properties(mminfer_static PROPERTIES OUTPUT_NAME mminfer EXPORT_NAME mminfer_static)
target_include_directories(mminfer_static INTERFACE $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
                                                    $<INSTALL_INTERFACE:include>)
target_compile_features(mminfer_static INTERFACE cxx_std_20)
target_link_libraries(mminfer_static INTERFACE ${MMINFER_STATIC_DEPENDENCIES})

include(GNUInstallDirs)
include(CMakePackageConfigHelpers)
set(MMINFER_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/mminfer)
install(TARGETS mminfer_shared mminfer_static EXPORT mminfer-targets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY include/mminfer DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT mminfer-targets NAMESPACE mminfer:: DESTINATION ${MMINFER_CMAKE_DIR})
configure_package_config_file(cmake/mminfer-config.cmake.in ${CMAKE_BINARY_DIR}/mminfer-config.cmake
                              INSTALL_DESTINATION ${MMINFER_CMAKE_DIR})
write_basic_package_version_file(${CMAKE_BINARY_DIR}/mminfer-config-version.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/mminfer-config.cmake ${CMAKE_BINARY_DIR}/mminfer-config-version.cmake
        DESTINATION ${MMINFER_CMAKE_DIR})
list(TRANSFORM MMINFER_STATIC_DEPENDENCIES PREPEND "-l" OUTPUT_VARIABLE MMINFER_PC_PRIVATE_LIBS)
list(JOIN MMINFER_PC_PRIVATE_LIBS " " MMINFER_PC_PRIVATE_LIBS)
# mminfer.pc finds the prefix from its own place, so an install moved elsewhere still works.
file(RELATIVE_PATH MMINFER_PC_TO_PREFIX ${CMAKE_INSTALL_FULL_LIBDIR}/pkgconfig ${CMAKE_INSTALL_PREFIX})
configure_file(cmake/mminfer.pc.in ${CMAKE_BINARY_DIR}/mminfer.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/mminfer.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
