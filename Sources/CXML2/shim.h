// libxml2's streaming reader, for the RSS and Atom reader of CacheService
// (XMLFeedReader.swift), and its HTML parser, for the text of an HTML title
// or summary (HTMLText.swift). Only what Swift cannot reach directly is added here.
#include <libxml/xmlreader.h>
#include <libxml/HTMLparser.h>
#include <libxml/parserInternals.h>

/// Whether a DOCTYPE node (the reader's XML_READER_TYPE_DOCUMENT_TYPE)
/// declares any general or parameter entity in its internal subset.
static inline int cxml2_dtd_declares_entities(xmlNodePtr node) {
    if (node == NULL || node->type != XML_DTD_NODE) return 0;
    xmlDtdPtr dtd = (xmlDtdPtr)node;
    return dtd->entities != NULL || dtd->pentities != NULL;
}

/// Whether a DOCTYPE node declares any attribute list (`<!ATTLIST`) in
/// its internal subset: libxml2 copies each default into every element
/// it applies to, as the element is parsed.
static inline int cxml2_dtd_declares_attributes(xmlNodePtr node) {
    if (node == NULL || node->type != XML_DTD_NODE) return 0;
    return ((xmlDtdPtr)node)->attributes != NULL;
}

/// The same for the document a failed reader leaves behind.
static inline int cxml2_doc_declares_attributes(xmlDocPtr doc) {
    return doc != NULL && doc->intSubset != NULL && doc->intSubset->attributes != NULL;
}

/// Whether a document's internal subset declares any entity (for the
/// document a failed reader leaves behind).
static inline int cxml2_doc_declares_entities(xmlDocPtr doc) {
    if (doc == NULL || doc->intSubset == NULL) return 0;
    return doc->intSubset->entities != NULL || doc->intSubset->pentities != NULL;
}
