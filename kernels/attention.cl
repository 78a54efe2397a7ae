/* attention.cl - (being written) */
